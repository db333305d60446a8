#!/bin/sh
# check_install.sh - what `make install` and the build tree give a user of the library:
# `make install DESTDIR=<tmp>` installs ternion-server beside the CLI (runnable: --help) and
# ternion-gen (`--from-gguf` drafts a YAML for a file no built-in model fits), and a
# program linked against the build tree ($B/libternion.so, soname libternion.so.0) runs with
# LD_LIBRARY_PATH=$B (the build keeps the libternion.so.0 link). Run by `make test`.
B=${B:-build}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
make --no-print-directory -s install DESTDIR="$tmp" PREFIX=/usr B="$B" >"$tmp/install.log" 2>&1 || {
    echo "check_install: make install failed:"; cat "$tmp/install.log"; exit 1; }
for f in ternion ternion-server ternion-gen; do
    [ -x "$tmp/usr/bin/$f" ] || { echo "check_install: make install did not install $f"; exit 1; }
done
"$tmp/usr/bin/ternion-server" --help >/dev/null || { echo "check_install: the installed ternion-server --help failed"; exit 1; }
printf '#include <stdio.h>\n#include "ternion.h"\nint main(void) { return printf("%%s\\n", ternion_version()) < 0; }\n' >"$tmp/app.c"
# shellcheck disable=SC2086 # SAN: the sanitizer flags the library was built with (make asan), so
# the program brings their runtime first
${CC:-cc} ${SAN:-} -Iruntime/api -o "$tmp/app" "$tmp/app.c" -L"$B" -lternion || { echo "check_install: cannot link against $B"; exit 1; }
LD_LIBRARY_PATH="$B" "$tmp/app" >/dev/null || {
    echo "check_install: a program linked against $B/libternion.so does not run (exit $?): is $B/libternion.so.0 there?"; exit 1; }
echo "check_install: make install installs ternion-server and ternion-gen; programs linked against $B run"
