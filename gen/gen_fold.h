/* gen_fold.h - the decode schedule's folds (gen_fold.c).
 *
 * Owns: the entry of the folds a fused decode graph gets after its attentions were split: the
 * loop norm, the next norm, the norms read by one kop, the cache writes, in that order.
 */
#ifndef GEN_FOLD_H
#define GEN_FOLD_H

#include "gen_graph.h"

/* Fold g's decode kops (fused decode graphs, after split_decode_attention). */
void gen_fold_decode(gen_graph *g);

#endif
