/*
 * tool_util — clock helpers and sibling processes for the teaching tools
 * (see the header). Invariant: a started child is always reaped by
 * tool_proc_stop().
 */
#include "tools/tool_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/strnum.h"
#include "core/tg_error.h"
#include "platform/clock.h"

double tool_now(void)
{
        return (double)clock_mono_now() / (double)TG_NS_PER_S;
}

void tool_sleep(double seconds)
{
        clock_sleep_ns((tg_mono_ns)(seconds * (double)TG_NS_PER_S));
}

int tool_sibling(const char *name, char *buf, size_t size)
{
        char self[1024];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

        if (n <= 0)
                return -errno;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (!slash)
                return TG_ENOTFOUND;
        *slash = '\0';
        int w = snprintf(buf, size, "%s/%s", self, name);
        if (w < 0 || (size_t)w >= size)
                return TG_EFULL;
        if (access(buf, X_OK) != 0)
                return -errno;
        return 0;
}

int tool_proc_init(struct tool_proc *p, const char *prefix)
{
        memset(p, 0, sizeof(*p));
        snprintf(p->dir, sizeof(p->dir), "/tmp/%s-XXXXXX", prefix);
        if (!mkdtemp(p->dir)) {
                int e = errno;
                p->dir[0] = '\0';
                return -e;
        }
        snprintf(p->log, sizeof(p->log), "%s/log", p->dir);
        return 0;
}

static int read_port(const char *path)
{
        char buf[32];
        FILE *f = fopen(path, "r");
        if (!f)
                return 0;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        uint64_t port;
        char *nl = strchr(buf, '\n');
        if (nl)
                *nl = '\0';
        if (strnum_u64(buf, 1, 65535, &port) < 0)
                return 0;
        return (int)port;
}

int tool_proc_start(struct tool_proc *p, char *const argv[], const char *port_file,
                    double timeout_s)
{
        int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDONLY);
                if (devnull >= 0)
                        dup2(devnull, 0);
                dup2(fd, 1);
                dup2(fd, 2);
                execv(argv[0], argv);
                _exit(127);
        }
        close(fd);
        p->pid = pid;
        if (!port_file)
                return 0;
        double deadline = tool_now() + timeout_s;
        while (tool_now() < deadline) {
                int status;
                if (waitpid(pid, &status, WNOHANG) == pid) {
                        p->pid = 0;
                        return TG_EIO;
                }
                p->port = read_port(port_file);
                if (p->port > 0)
                        return 0;
                tool_sleep(0.01);
        }
        tool_proc_stop(p);
        return TG_EIO;
}

void tool_proc_stop(struct tool_proc *p)
{
        if (!p || p->pid <= 0)
                return;
        kill(p->pid, SIGTERM);
        double deadline = tool_now() + 5.0;
        int status;
        while (waitpid(p->pid, &status, WNOHANG) == 0) {
                if (tool_now() > deadline) {
                        kill(p->pid, SIGKILL);
                        waitpid(p->pid, &status, 0);
                        break;
                }
                tool_sleep(0.01);
        }
        p->pid = 0;
}

void tool_proc_release(struct tool_proc *p)
{
        if (!p)
                return;
        tool_proc_stop(p);
        if (!p->dir[0])
                return;
        /* The dir is ours (mkdtemp) and flat: remove every file in it. */
        DIR *d = opendir(p->dir);
        if (d) {
                const struct dirent *e;
                while ((e = readdir(d)) != NULL) {
                        char path[512];
                        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", p->dir, e->d_name);
                        unlink(path);
                }
                closedir(d);
        }
        rmdir(p->dir);
        p->dir[0] = '\0';
}

int tool_free_port(void)
{
        struct sockaddr_in a;
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
            getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        close(fd);
        return ntohs(a.sin_port);
}
