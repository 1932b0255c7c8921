/* LD_PRELOAD shim for wrk: every TLS connection makes a full handshake.
 *
 * wrk closes a connection with SSL_shutdown + SSL_clear and reuses the SSL
 * object for the next one; SSL_clear keeps the session, so the next
 * SSL_connect resumes it (TLS 1.3: a PSK from the server's ticket). This
 * wraps SSL_clear and drops the session afterwards, so that the next
 * connect starts from nothing. Built by scripts/bench-tls.sh:
 *   gcc -O2 -shared -fPIC -o wrk_noresume.so wrk_noresume.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>

typedef struct ssl_st SSL;
typedef struct ssl_session_st SSL_SESSION;
int SSL_set_session(SSL *s, SSL_SESSION *session);

int SSL_clear(SSL *s) {
    static int (*real)(SSL *);
    if (!real)
        real = (int (*)(SSL *))dlsym(RTLD_NEXT, "SSL_clear");
    int r = real(s);
    /* A NULL session: the next SSL_connect offers none (a full handshake). */
    SSL_set_session(s, 0);
    return r;
}
