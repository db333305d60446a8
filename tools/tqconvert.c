/* tqconvert - re-encodes the I2_S ternary tensors of a GGUF into ggml's TQ1_0 or TQ2_0
 * blocks, keeping every other tensor and all metadata (rt_tq_convert, runtime/gguf/rt_tq.h).
 *
 *   tqconvert IN.gguf OUT.gguf tq1|tq2
 */
#include <stdio.h>
#include <string.h>

#include "gguf/rt_gguf.h"
#include "gguf/rt_tq.h"

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[3], "tq1") && strcmp(argv[3], "tq2"))) {
        fprintf(stderr, "usage: %s IN.gguf OUT.gguf tq1|tq2\n", argv[0]);
        return 2;
    }
    const rt_type to = !strcmp(argv[3], "tq1") ? FMT_TQ1_0 : FMT_TQ2_0;
    char err[RT_ERR_LEN];
    int n = 0;
    if (rt_tq_convert(argv[1], argv[2], to, &n, err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    fprintf(stderr, "%s: %d ternary tensors as %s\n", argv[2], n, fmt_type_name(to));
    return 0;
}
