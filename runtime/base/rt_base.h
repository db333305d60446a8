/* rt_base.h - the runtime's leaf definitions, included by every runtime part and including
 * nothing of the project but format/: the size of error buffers.
 */
#ifndef RT_BASE_H
#define RT_BASE_H

#include "format/fmt_codec.h" /* FMT_ERR_LEN */

#define RT_ERR_LEN FMT_ERR_LEN /* size of every `char *err` buffer in the runtime */

#endif
