/*
 * server_app.c: the smallest program embedding the REST server (sextant_server.h), compiled by
 * tests/pkgconfig/run.sh with nothing but `pkg-config --cflags --libs sextant_server`.
 * Usage: server_app DIR. Starts the server on DIR (loopback, ephemeral port), prints the port,
 * stops it. Exit 0 on success.
 */
#include <sextant_server.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    sx_server_options o = { .data_dir = argv[1], .port = 0, .quiet = true, .http_threads = 2 };
    sx_server *s = NULL;
    sx_status st = sx_server_start(&o, &s);
    if (st != SX_OK) {
        fprintf(stderr, "server_app: sx_server_start: %s (%s)\n", sx_status_str(st), sx_errmsg());
        return 1;
    }
    printf("server_app: serving %s on 127.0.0.1:%u\n", argv[1], (unsigned)sx_server_port(s));
    st = sx_server_stop(s);
    if (st != SX_OK) {
        fprintf(stderr, "server_app: sx_server_stop: %s (%s)\n", sx_status_str(st), sx_errmsg());
        return 1;
    }
    return 0;
}
