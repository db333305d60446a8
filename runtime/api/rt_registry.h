/* rt_registry.h - the generated models linked into libternion.
 *
 * Each generated/<model>/model.c defines `const rt_model_desc rt_model_<id>` (id: the
 * model name with every character other than a letter or digit replaced by '_'). The
 * Makefile writes $(B)/registry.c listing every one of them (tools/registry_c.sh: grep of the
 * definitions, in the sorted order of the model names), so adding models/<name>.yaml and
 * running `make gen && make` is all it takes for the library, the `ternion` CLI and
 * `make run MODEL=file.gguf` to know the new model. A model's own binary (build/<model>)
 * links a registry of that model alone ($(B)/registry-<model>.c), and so its kernels alone.
 */
#ifndef RT_REGISTRY_H
#define RT_REGISTRY_H

#include "schema/rt_schedule.h"

extern const rt_model_desc *const rt_registry[];
extern const unsigned rt_registry_count;

#endif
