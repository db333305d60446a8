/* rt_cli_main.c - main() of the command line.
 *
 * Built once per generated model (build/<model>: -DRT_CLI_MODEL='"<model>"' pins the model,
 * so `build/bitnet-b1.58-2b -m file.gguf` refuses a file that does not fit it, as always)
 * and once without (build/ternion: the generated model is chosen from the file's metadata).
 */
#include <stddef.h>

#include "rt_cli_priv.h"

#ifndef RT_CLI_MODEL
#define RT_CLI_MODEL NULL
#endif

int main(int argc, char **argv)
{
    return rt_cli_main(argc, argv, RT_CLI_MODEL);
}
