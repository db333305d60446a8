/* rt_engine_backend.c - the backend table's two rows and the engine's entry points that
 * call through it.
 *
 * Owns: rt_backend_vk and rt_backend_cpu (rt_engine_backend.h), and every rt_engine_* entry
 * point of RT_BACKEND_OPS: each is `return e->be->name(args)`, e->be set by rt_engine_open
 * to the backend it opened, and rt_engine_is_cpu. The rows are made from the same list, so a
 * backend that lacks an operation does not link.
 */
#include "engine/rt_engine_priv.h"

#define ROW(ret, name, params, args) .name = rt_eng_vk_##name,
const rt_backend rt_backend_vk = {.name = "vulkan", RT_BACKEND_OPS(ROW)};
#undef ROW

#define ROW(ret, name, params, args) .name = rt_eng_cpu_##name,
const rt_backend rt_backend_cpu = {.name = "cpu", RT_BACKEND_OPS(ROW)};
#undef ROW

#define RET_int return
#define RET_uint32_t return
#define RET_uint64_t return
#define RET_void
#define ENTRY(ret, name, params, args) \
    ret rt_engine_##name params { RET_##ret e->be->name args; }
RT_BACKEND_OPS(ENTRY)
#undef ENTRY

bool rt_engine_is_cpu(const rt_engine *e) { return e->be == &rt_backend_cpu; }
