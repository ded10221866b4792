# tollgate in a container, for teams that deploy containers. Everything it
# does is the .deb's own install (which CI builds, installs, runs and removes
# on a Debian machine); this file only puts that package in a Debian image.
#
#   cmake -S . -B build-pkg -DBUILD_TESTING=OFF && cmake --build build-pkg
#   (cd build-pkg && cpack -G DEB)      # tollgate_<v>_<arch>.deb, tollgate-stub_<v>_<arch>.deb
#   docker build -t tollgate --build-arg DEB=build-pkg/tollgate_0.1.0_amd64.deb .
#   docker run -v tollgate-state:/var/lib/tollgate -v /srv/tollgate/etc:/etc/tollgate:ro tollgate
#
# Mount your own /etc/tollgate (tollgate.ini and the token, chmod 600, owned by
# the tollgate user of the image: `docker run --rm tollgate id tollgate`).
FROM debian:bookworm-slim
ARG DEB=tollgate.deb
COPY ${DEB} /tmp/tollgate.deb
RUN apt-get update \
 && apt-get install -y --no-install-recommends /tmp/tollgate.deb curl \
 && rm -rf /var/lib/apt/lists/* /tmp/tollgate.deb
USER tollgate
WORKDIR /var/lib/tollgate
VOLUME ["/var/lib/tollgate"]
EXPOSE 8080
# Readiness, not liveness: the store answers and this process owns the exit
# or stands by. (Listen on 0.0.0.0 in tollgate.ini to publish the port; the
# config then requires the token, which the package generated.)
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/readyz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tollgate"]
CMD ["serve", "--config", "/etc/tollgate/tollgate.ini"]
