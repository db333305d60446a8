#!/bin/sh
# registry_c.sh MODEL_C... - writes to stdout the C source of a registry of generated models
# (runtime/api/rt_registry.h): every `const rt_model_desc rt_model_<id>` the given
# generated/<model>/model.c files define, in the order given. Run by the Makefile twice over:
# on every model for libternion's registry, and on one model for that model's own binary
# (build/<model> then links that model's kernels alone, not every model's).
set -e
syms=$(for f in "$@"; do
    sed -n 's/^const rt_model_desc \(rt_model_[A-Za-z0-9_]*\) = {$/\1/p' "$f"
done)
echo '/* registry.c - written by tools/registry_c.sh: the generated models linked in. */'
echo '#include <stddef.h>'
echo '#include "api/rt_registry.h"'
for s in $syms; do echo "extern const rt_model_desc $s;"; done
echo 'const rt_model_desc *const rt_registry[] = {'
for s in $syms; do echo "    &$s,"; done
echo '    NULL,'
echo '};'
echo "const unsigned rt_registry_count = $(echo $syms | wc -w);"
