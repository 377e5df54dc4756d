/*
 * webui.c: the web console's files (docs/internals/WEBUI.md), built into the binary by
 * cmake/embed_webui.cmake as the table sx__webui_files (name, bytes, length, ETag). http.c asks
 * sx__webui_lookup for GET/HEAD requests under /webui and sends what it says; nothing here
 * touches the network or the file system.
 *
 *   /webui          -> 301 to /webui/
 *   /webui/         -> index.html
 *   /webui/NAME     -> the file NAME (one path segment: no '/', no "..")
 *   anything else   -> 404
 * A request whose If-None-Match equals the file's ETag gets 304 without a body.
 *
 * The files need no credentials (they hold no data; the page asks for a token and sends it
 * with every API call). Headers (set by http.c from the answer): the type by extension, the
 * ETag, Cache-Control no-cache (revalidate: a new binary may serve other files), and the
 * security headers of SX__WEBUI_CSP and friends: scripts and styles from the server only, no
 * inline script, no framing.
 *
 * Thread-safety: reads constant data only.
 */
#include <stddef.h>
#include <string.h>

#include "server/server.h"

struct sx__webui_file {
    const char *name;
    const unsigned char *data;
    size_t len;
    const char *etag;
};
extern const struct sx__webui_file sx__webui_files[];

static const char *type_of(const char *name)
{
    const char *dot = strrchr(name, '.');

    static const struct {
        const char *ext, *type;
    } types[] = {
        { ".html", "text/html; charset=utf-8" },
        { ".js", "text/javascript; charset=utf-8" },
        { ".css", "text/css; charset=utf-8" },
        { ".svg", "image/svg+xml" },
        { ".png", "image/png" },
        { ".json", "application/json" },
        { ".ico", "image/x-icon" },
    };

    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

bool sx__webui_path(const char *url)
{
    return strncmp(url, "/webui", 6) == 0 && (url[6] == '\0' || url[6] == '/');
}

void sx__webui_lookup(const char *url, const char *if_none_match, sx__webui_answer *out)
{
    memset(out, 0, sizeof *out);
    out->status = 404;
    if (!sx__webui_path(url))
        return;
    if (url[6] == '\0') {
        out->status = 301;
        out->location = "/webui/";
        return;
    }
    const char *name = url + 7;
    if (*name == '\0')
        name = "index.html";
    if (strchr(name, '/') || strstr(name, ".."))
        return;
    for (const struct sx__webui_file *f = sx__webui_files; f->name; f++) {
        if (strcmp(f->name, name) != 0)
            continue;
        out->ctype = type_of(f->name);
        out->etag = f->etag;
        if (if_none_match && strcmp(if_none_match, f->etag) == 0) {
            out->status = 304;
            return;
        }
        out->status = 200;
        out->data = f->data;
        out->len = f->len;
        return;
    }
}
