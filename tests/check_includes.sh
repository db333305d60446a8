#!/bin/sh
# tests/check_includes.sh - the include direction between the folders (docs/architecture.md),
# run by `make test`. Every `#include "..."` of a .c / .h file in a folder below is resolved
# as the compiler does (the file's own folder, then -I. -Idsl -Igen -Iruntime, the
# Makefile's order) and must land in one of the folders that folder may include:
#   format/  format/                      (weight codecs: nothing else of the project)
#   schema/  schema/ format/              (the generator <-> runtime tables)
#   dsl/     dsl/ schema/                 (the shader builder)
#   gen/     gen/ dsl/ schema/ format/ runtime/gguf/  (the generator: of the runtime only the GGUF
#                    reader, which --from-gguf drafts a YAML from; gen_draft.c)
#   runtime/base/    runtime/base/ format/              (leaf definitions: RT_ERR_LEN)
#   runtime/gguf/    runtime/gguf/ runtime/base/ format/
#   runtime/vk/      runtime/vk/ runtime/base/ schema/ format/
#   runtime/tok/     runtime/tok/ runtime/gguf/ runtime/base/ format/
#   runtime/cpu/     runtime/cpu/ runtime/gguf/ runtime/base/ schema/ format/  (the native CPU
#                    backend: no Vulkan, no engine; the engine includes it, never the reverse)
#   runtime/sample/  runtime/sample/ runtime/base/   (sampler, GBNF grammars, JSON schema -> GBNF:
#                    plain C on token ids and text, nothing of the model, device or file format)
#   runtime/engine/  runtime/engine/ runtime/cpu/ runtime/vk/ runtime/gguf/ runtime/base/ schema/ format/
#   runtime/api/     runtime/api/ runtime/engine/ runtime/sample/ runtime/vk/ runtime/gguf/ runtime/tok/
#                    runtime/base/ schema/ format/
#   runtime/cli/     runtime/cli/ runtime/api/      (the public header only)
#   server/          server/ runtime/api/
#   tools/           tools/ gen/ dsl/ schema/ format/ runtime/gguf/ runtime/tok/ runtime/base/
# and a folder's private header (*_priv.h) is included from that folder only.
# An include that resolves nowhere is an error too (it would hide a runtime header reached
# some other way). System headers (<...>) are not checked.
RULES="format:format schema:schema,format dsl:dsl,schema gen:gen,dsl,schema,format,runtime/gguf
runtime/base:runtime/base,format runtime/gguf:runtime/gguf,runtime/base,format
runtime/vk:runtime/vk,runtime/base,schema,format runtime/tok:runtime/tok,runtime/gguf,runtime/base,format
runtime/cpu:runtime/cpu,runtime/gguf,runtime/base,schema,format
runtime/sample:runtime/sample,runtime/base
runtime/engine:runtime/engine,runtime/cpu,runtime/vk,runtime/gguf,runtime/base,schema,format
runtime/api:runtime/api,runtime/engine,runtime/sample,runtime/vk,runtime/gguf,runtime/tok,runtime/base,schema,format
runtime/cli:runtime/cli,runtime/api server:server,runtime/api
tools:tools,gen,dsl,schema,format,runtime/gguf,runtime/tok,runtime/base"
IPATH=". dsl gen runtime runtime/api"
fail=0
for rule in $RULES; do
    dir=${rule%%:*}
    allowed=$(echo "${rule#*:}" | tr ',' ' ')
    for f in $(find "$dir" -name '*.[ch]' | sort); do
        for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
            hit=""
            for p in "$(dirname "$f")" $IPATH; do
                if [ -f "$p/$inc" ]; then
                    hit=$(realpath --relative-to=. "$p/$inc")
                    break
                fi
            done
            if [ -z "$hit" ]; then
                echo "check_includes: $f includes \"$inc\", which is no file of the project"
                fail=1
                continue
            fi
            ok=0
            for a in $allowed; do
                case $hit in "$a"/*) ok=1 ;; esac
            done
            if [ $ok -eq 0 ]; then
                echo "check_includes: $f includes \"$inc\" ($hit): $dir/ may include only $allowed"
                fail=1
            fi
            case $hit in *_priv.h)
                if [ "$(dirname "$hit")" != "$(dirname "$f")" ]; then
                    echo "check_includes: $f includes $hit, the private header of another folder"
                    fail=1
                fi ;;
            esac
        done
    done
done
[ $fail -eq 0 ] && echo "check_includes: format/ schema/ dsl/ gen/ runtime/*/ server/ tools/ include only the folders they may"
exit $fail
