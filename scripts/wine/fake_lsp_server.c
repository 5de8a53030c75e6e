/* A language server for the Windows tests (tests/suite/windows.rs), built by scripts/wine.sh
 * with mingw: it answers `initialize`, `hover` (with its process id: "served by pid N"),
 * `shutdown` and `exit`, and null to any other request; at its first start in a folder it holds
 * 64 MiB it has written to, so that its tree is over a small `[lsp] max_memory_mb`. Like a stubborn server it keeps
 * running when its input ends: only gimlet's cleanup stops it. */
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

static char *read_message(void) {
    char line[512];
    long length = -1;
    for (;;) {
        if (!fgets(line, sizeof line, stdin)) return NULL;
        if (strcmp(line, "\r\n") == 0 || strcmp(line, "\n") == 0) {
            if (length >= 0) break;
            continue;
        }
        if (_strnicmp(line, "Content-Length:", 15) == 0) length = strtol(line + 15, NULL, 10);
    }
    char *body = malloc((size_t)length + 1);
    if (!body || fread(body, 1, (size_t)length, stdin) != (size_t)length) return NULL;
    body[length] = 0;
    return body;
}

static void send_message(const char *body) {
    printf("Content-Length: %u\r\n\r\n%s", (unsigned)strlen(body), body);
    fflush(stdout);
}

/* The request's id (gimlet sends numbers), or -1 for a notification. */
static long id_of(const char *body) {
    const char *at = strstr(body, "\"id\":");
    return at ? strtol(at + 5, NULL, 10) : -1;
}

int main(void) {
    _setmode(_fileno(stdin), _O_BINARY);
    _setmode(_fileno(stdout), _O_BINARY);
    /* Only its first start in a folder holds the 64 MiB: the server started again stays
     * under the cap. */
    size_t held = GetFileAttributesA("fake_lsp_started") == INVALID_FILE_ATTRIBUTES ? 64u << 20 : 1;
    FILE *mark = fopen("fake_lsp_started", "w");
    if (mark) fclose(mark);
    char *ballast = malloc(held);
    if (ballast) memset(ballast, 1, held);
    char reply[512];
    for (;;) {
        char *body = read_message();
        if (!body) {
            for (;;) Sleep(60000);
        }
        long id = id_of(body);
        if (strstr(body, "\"method\":\"initialize\"")) {
            snprintf(reply, sizeof reply,
                     "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"capabilities\":"
                     "{\"textDocumentSync\":1,\"hoverProvider\":true}}}",
                     id);
            send_message(reply);
        } else if (strstr(body, "\"method\":\"textDocument/hover\"")) {
            snprintf(reply, sizeof reply,
                     "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":{\"contents\":"
                     "\"served by pid %lu\"}}",
                     id, (unsigned long)GetCurrentProcessId());
            send_message(reply);
        } else if (strstr(body, "\"method\":\"exit\"")) {
            return ballast ? 0 : 1;
        } else if (id >= 0 && strstr(body, "\"method\":")) {
            snprintf(reply, sizeof reply, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":null}", id);
            send_message(reply);
        }
        free(body);
    }
}
