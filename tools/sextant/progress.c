/*
 * progress.c: the terminal status line of progress.h. Draws with a carriage return and an
 * erase-to-end-of-line escape (ESC [ K), which every terminal emulator in use understands; when
 * stderr is not a terminal nothing is ever written. SX_NO_PROGRESS=1 turns it off on a terminal
 * too (screen recordings, tests driving a pty).
 */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define BAR_WIDTH 24

void prog_begin(prog *p, const char *label, const char *unit, uint64_t total)
{
    memset(p, 0, sizeof *p);
    const char *off = getenv("SX_NO_PROGRESS");
    p->on = isatty(STDERR_FILENO) && !(off != NULL && off[0] != '\0' && strcmp(off, "0") != 0);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->unit = unit;
    p->total = total;
    p->t0 = cli_now();
    p->last = 0;
}

void prog_update(prog *p, uint64_t done)
{
    if (!p->on)
        return;
    double now = cli_now();
    if (p->drawn && now - p->last < 0.1 && done < p->total)
        return;
    p->last = now;
    p->drawn = true;
    double el = now - p->t0;
    if (p->total == 0) {
        fprintf(stderr, "\r\033[K%-12s %llu %s  %.1f s", p->label, (unsigned long long)done,
                p->unit, el);
        (void)fflush(stderr);
        return;
    }
    double f = done >= p->total ? 1.0 : (double)done / (double)p->total;
    char bar[BAR_WIDTH + 1];
    size_t fill = (size_t)(f * BAR_WIDTH);
    for (size_t j = 0; j < BAR_WIDTH; j++)
        bar[j] = j < fill ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    char eta[48] = "";
    if (f > 0.01 && f < 1.0)
        snprintf(eta, sizeof eta, "  eta %.1f s", el / f - el);
    fprintf(stderr, "\r\033[K%-12s [%s] %5.1f%%  %llu/%llu %s  %.1f s%s", p->label, bar, f * 100.0,
            (unsigned long long)done, (unsigned long long)p->total, p->unit, el, eta);
    (void)fflush(stderr);
}

void prog_end(prog *p)
{
    if (p->on && p->drawn) {
        fprintf(stderr, "\r\033[K");
        (void)fflush(stderr);
    }
    p->drawn = false;
}
