# tests/e2e/node/common.sh: what the Node test scripts (run.sh, run_report_browser.sh,
# run_webui_browser.sh) share: the checks below, and starting / stopping a sextant server;
# sourced after they set $here. Each need_* ends the script as skipped (exit 77, with the reason)
# or failed (exit 1) when what it names is missing.

# need_node MAJOR WHY: node on the PATH, version >= MAJOR (WHY: what needs it).
need_node() {
    if ! command -v node >/dev/null 2>&1; then
        echo "node not found: skipped"
        exit 77
    fi
    local major
    major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
    if [ "${major:-0}" -lt "$1" ]; then
        echo "node $(node --version) is older than $1 ($2): skipped"
        exit 77
    fi
}

# need_module PATH NAME: $here/node_modules/PATH exists (installed by `npm ci` here).
need_module() {
    if [ ! -e "$here/node_modules/$1" ]; then
        echo "$here/node_modules/$2 missing (run: cd tests/e2e/node && npm ci): skipped"
        exit 77
    fi
}

# need_sextant: $bin = $SX_SEXTANT_BIN, which ctest sets to the sextant binary.
need_sextant() {
    bin="${SX_SEXTANT_BIN:-}"
    if [ -z "$bin" ] || [ ! -x "$bin" ]; then
        echo "SX_SEXTANT_BIN is not set to the sextant binary" >&2
        exit 1
    fi
}

# make_tmp NAME: $tmp = a fresh directory NAME.XXXXXX under $SX_TMPDIR (or $TMPDIR, /tmp).
make_tmp() {
    local base="${SX_TMPDIR:-${TMPDIR:-/tmp}}"
    mkdir -p "$base"
    tmp="$(mktemp -d "$base/$1.XXXXXX")"
}

# free_port: prints a TCP port free on 127.0.0.1 now (it may be taken before it is used).
free_port() {
    node -e 'const s = require("net").createServer();
             s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# wait_live URL PID: GET URL until it answers 200 (0), the process PID exits (2), or 30 s (1).
wait_live() {
    node -e '
      const [url, pid] = [process.argv[1], Number(process.argv[2])];
      const deadline = Date.now() + 30000;
      (async () => {
        for (;;) {
          try { process.kill(pid, 0); } catch { process.exit(2); }
          try { const r = await fetch(url); if (r.status === 200) process.exit(0); } catch {}
          if (Date.now() > deadline) process.exit(1);
          await new Promise((r) => setTimeout(r, 100));
        }
      })();' "$1" "$2"
}

# start_sextant [ARGS...]: "$bin" serve on a fresh $tmp/data and a free loopback port with ARGS,
# its output in $tmp/server.log; sets $pid and $port once GET /livez answers. A port found free
# can be taken before the server binds it: three tries. Returns 1 when it never came up.
start_sextant() {
    local attempt
    for attempt in 1 2 3; do
        port="$(free_port)"
        rm -rf "$tmp/data"
        "$bin" serve --data "$tmp/data" --port "$port" --quiet "$@" >"$tmp/server.log" 2>&1 &
        pid=$!
        if wait_live "http://127.0.0.1:$port/livez" "$pid"; then
            return 0
        fi
        echo "server did not come up on port $port (attempt $attempt):" >&2
        cat "$tmp/server.log" >&2
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        pid=""
    done
    return 1
}

# kill_sextant: SIGKILL $pid if it still runs (for an EXIT trap).
kill_sextant() {
    if [ -n "${pid:-}" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
}

# stop_sextant: graceful stop of $pid: SIGTERM, up to 60 s, exit status 0. Returns 0 when so,
# else 1 (after printing the server's log).
stop_sextant() {
    kill -TERM "$pid"
    for _ in $(seq 1 600); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "server did not exit within 60 s of SIGTERM" >&2
        return 1
    fi
    wait "$pid"
    local src=$?
    pid=""
    if [ "$src" != 0 ]; then
        echo "server exited with status $src after SIGTERM; its log:" >&2
        cat "$tmp/server.log" >&2
        return 1
    fi
    return 0
}
