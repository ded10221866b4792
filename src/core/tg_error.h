/*
 * One project-wide set of error codes. Functions return 0 on success and a
 * negative code on failure: -errno where it fits, else one of TG_E* below
 * (all below -1000 so they never collide with errno values). Library codes
 * (CURLcode, SQLITE_*, MariaDB, MHD) never leave their wrapper module.
 */
#ifndef TG_ERROR_H
#define TG_ERROR_H

#define TG_ERRORS(X)                                                                               \
        X(TG_EINVAL, -1001, "invalid argument")                                                    \
        X(TG_ENOMEM, -1002, "out of memory")                                                       \
        X(TG_EAGAIN, -1003, "not now, try again later")                                            \
        X(TG_ENOTFOUND, -1004, "not found")                                                        \
        X(TG_ECONFLICT, -1005, "conflicts with what is stored")                                    \
        X(TG_EFULL, -1006, "bound reached")                                                        \
        X(TG_ESTORE, -1007, "store failure")                                                       \
        X(TG_EBUSY, -1008, "store busy or locked")                                                 \
        X(TG_EFENCED, -1009, "epoch fenced: another owner took the exit")                          \
        X(TG_EPARSE, -1010, "cannot parse")                                                        \
        X(TG_ERANGE, -1011, "value out of range")                                                  \
        X(TG_EIO, -1012, "input/output failure")                                                   \
        X(TG_ETRANSPORT, -1013, "transport failure")                                               \
        X(TG_ESTATE, -1014, "operation is not in a state that allows this")                        \
        X(TG_ECONFIG, -1015, "bad configuration")                                                  \
        X(TG_ELOCKED, -1016, "held by another process")                                            \
        X(TG_EUNSUPPORTED, -1017, "not supported by this build")

enum tg_error {
#define TG_ERROR_ENUM(name, value, text) name = value,
        TG_ERRORS(TG_ERROR_ENUM)
#undef TG_ERROR_ENUM
};

/* A static, human-readable text for any code this project returns
 * (TG_E* or -errno). Never NULL. */
const char *tg_strerror(int code);

#endif
