#!/bin/sh
# tests/check_doc_paths.sh [FILE.md...] - every file or folder a guide names exists, run by
# `make test`. The guides are README.md, CONTRIBUTING.md, docs/*.md and models/README.md
# (or the files given). Two kinds of names are checked:
#   - a path in the text: a token whose first component is a top-level folder of the project
#     (`gen/gen_act.c`, `tests/data/`, `docs/server.md#metrics`), taken as relative to the
#     project root. A token right after `/`, `.`, `$`, `~`, `:` or a word character is part of
#     something else (a URL, `../shared/...`, `$HOME/...`) and is left alone, and so are
#     placeholders: a component holding `<`, `>`, `{`, `}` or `...`, or named X, x, N, NAME, FILE or
#     X.<ext> (`models/X.yaml`). A component with `*` is a pattern that must match something;
#     a program is named by its source without the `.c` (`tools/mkmodel`).
#   - the target of a Markdown link `[text](target)` that is not a URL or a mail address,
#     relative to the linking file's folder; its `#anchor`, on a Markdown file (`#x` alone: the
#     linking file), must be a heading there (GitHub's slug: lower case, punctuation dropped,
#     spaces as `-`).
# build/ and build-asan/ name what the build makes, not the project's files: never checked.
# Prints each name that resolves to nothing as FILE:LINE: NAME; exit status 1 if any.
cd "$(dirname "$0")/.." || exit 1
if [ $# -gt 0 ]; then
    files="$*"
else
    files="README.md CONTRIBUTING.md models/README.md $(ls docs/*.md)"
fi
# the project's top-level folders: what git tracks, else what is on disk (a source tarball)
tops=$(git ls-files 2>/dev/null | sed -n 's|^\([^/]*\)/.*|\1|p' | sort -u)
[ -n "$tops" ] || tops=$(find . -mindepth 1 -maxdepth 1 -type d ! -name '.*' | sed 's|^\./||' | sort)
tops=$(printf '%s\n' $tops | grep -v -x -e build -e build-asan | tr '\n' '|' | sed 's/|$//')
[ -n "$tops" ] || { echo "check_doc_paths: no project folders found"; exit 1; }

# FILE LINE NAME -> one "FILE:LINE: NAME" line per path-looking name (awk does the scanning;
# the shell checks each name on disk below)
names() {
    awk -v tops="$tops" '
        BEGIN { ntop = split(tops, t, "|"); for (i = 1; i <= ntop; i++) top[t[i]] = 1 }
        function emit(kind, name) { printf "%s\t%s\t%d\t%s\n", kind, FILENAME, FNR, name }
        {
            line = $0
            # Markdown link targets: ](target) or ](target "title")
            rest = line
            while (match(rest, /\]\([^) ]+/)) {
                tgt = substr(rest, RSTART + 2, RLENGTH - 2)
                rest = substr(rest, RSTART + RLENGTH)
                if (tgt ~ /^(https?:|mailto:)/) continue
                emit("L", tgt)
            }
            # paths in the text: tokens of path characters, at a boundary
            rest = " " line
            while (match(rest, /[^A-Za-z0-9_.\/$~:-][A-Za-z0-9_.*<>{}+-]+\/[A-Za-z0-9_.*<>{}\/+#-]*/)) {
                tok = substr(rest, RSTART + 1, RLENGTH - 1)
                rest = substr(rest, RSTART + RLENGTH)
                first = tok; sub(/\/.*/, "", first)
                if (!(first in top)) continue
                emit("P", tok)
            }
        }' "$@"
}

# the anchors of Markdown file $1: its headings as GitHub slugs, one a line
slugs() {
    sed -n 's/^#\{1,6\}[[:space:]]\{1,\}//p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

fail=0
tab=$(printf '\t')
names $files > "${TMPDIR:-/tmp}/check_doc_paths.$$" || fail=1
n=$(wc -l < "${TMPDIR:-/tmp}/check_doc_paths.$$")
while IFS="$tab" read -r kind file line name; do
    anchor=""
    case $name in *'#'*) anchor=${name#*#}; name=${name%%#*} ;; esac
    while :; do                             # sentence punctuation after a name
        case $name in *[.,:\;]) name=${name%?} ;; *) break ;; esac
    done
    if [ -z "$name" ]; then                 # #anchor: a heading of this page
        [ "$kind" = L ] && [ -n "$anchor" ] || continue
        name=$(basename "$file")
    fi
    case $name in *'<'*|*'>'*|*'{'*|*'}'*|*...*) continue ;; esac
    skip=0
    oldifs=$IFS; IFS=/
    for c in $name; do
        case $c in X|x|N|NAME|FILE|X.*|x.*|N.*|NAME.*|FILE.*) skip=1 ;; esac
    done
    IFS=$oldifs
    [ $skip -eq 1 ] && continue
    if [ "$kind" = L ]; then
        path="$(dirname "$file")/$name"
    else
        path=$name
    fi
    case $path in
    *'*'*)  # a pattern: something must match it
        set -- $path
        [ -e "$1" ] && continue ;;
    *)
        if [ -e "$path" ] || [ -e "$path.c" ]; then
            case $path in *.md) ;; *) continue ;; esac
            [ -z "$anchor" ] && continue
            slugs "$path" | grep -q -x -F -e "$anchor" && continue
            echo "check_doc_paths: $file:$line: $name has no heading for #$anchor"
            fail=1
            continue
        fi ;;
    esac
    echo "check_doc_paths: $file:$line: $name does not exist"
    fail=1
done < "${TMPDIR:-/tmp}/check_doc_paths.$$"
rm -f "${TMPDIR:-/tmp}/check_doc_paths.$$"
[ $fail -eq 0 ] && echo "check_doc_paths: the $n paths and links of $(echo $files | wc -w) guides exist"
exit $fail
