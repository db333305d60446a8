/* gen_yaml.h - a small typed walker over a libyaml document (internal to gen/).
 *
 * Owns: loading one YAML document with libyaml's node API (yaml_parser_load), after an
 * event pass that refuses a second document and nesting deeper than GEN_YAML_MAX_DEPTH,
 * and typed accessors that report every problem as `name:LINE:COL: message`
 * (1-based, from the node's start mark) into the caller's error buffer.
 * Mappings are checked for non-scalar and duplicate keys (libyaml does not).
 */
#ifndef GEN_YAML_H
#define GEN_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "gen_model.h"

typedef struct {
    yaml_document_t doc;
    bool loaded;
    const char *name; /* file name used in messages (borrowed) */
    char *err;        /* GEN_ERR_LEN bytes (borrowed) */
} gen_yaml;

/* Deepest nesting of lists / mappings accepted (a model description needs 4). */
#define GEN_YAML_MAX_DEPTH 32

/* Parses `text`, which must be exactly one document nested at most GEN_YAML_MAX_DEPTH
 * deep. Returns 0, or -1 with err set. */
int gen_yaml_open(gen_yaml *y, const char *text, size_t len, const char *name, char *err);
void gen_yaml_close(gen_yaml *y);
yaml_node_t *gen_yaml_root(gen_yaml *y);

gen_loc gen_yaml_loc(const yaml_node_t *n);
/* Writes "name:line:col: <fmt...>" for node n (or line 1 col 1 when n is NULL); returns -1. */
int gen_yaml_fail(gen_yaml *y, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, at an explicit location. */
int gen_yaml_fail_at(gen_yaml *y, gen_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

const char *gen_yaml_kind(const yaml_node_t *n); /* "scalar", "sequence", "mapping" */
/* The scalar's text, or NULL if n is not a scalar. */
const char *gen_yaml_text(const yaml_node_t *n);

/* Requires n to be a mapping with unique scalar keys, each listed in `allowed`
 * (NULL-terminated; NULL = any key). `what` names the mapping in messages. */
int gen_yaml_check_map(gen_yaml *y, yaml_node_t *n, const char *what, const char *const *allowed);
/* Value of `key` in mapping n, or NULL. */
yaml_node_t *gen_yaml_get(gen_yaml *y, yaml_node_t *n, const char *key);
/* Value of `key`; NULL with "missing field 'key' in <what>" reported at n. */
yaml_node_t *gen_yaml_need(gen_yaml *y, yaml_node_t *n, const char *key, const char *what);
/* Key node of the i-th pair of mapping n, and its value node. */
yaml_node_t *gen_yaml_pair_key(gen_yaml *y, yaml_node_t *n, int i);
yaml_node_t *gen_yaml_pair_value(gen_yaml *y, yaml_node_t *n, int i);
int gen_yaml_map_len(const yaml_node_t *n);
int gen_yaml_seq_len(const yaml_node_t *n);
yaml_node_t *gen_yaml_seq_item(gen_yaml *y, yaml_node_t *n, int i);

/* Typed scalars; `what` names the field in messages. */
int gen_yaml_str(gen_yaml *y, yaml_node_t *n, const char *what, char *out, size_t cap);
int gen_yaml_int(gen_yaml *y, yaml_node_t *n, const char *what, int64_t *out);
int gen_yaml_float(gen_yaml *y, yaml_node_t *n, const char *what, double *out);
int gen_yaml_bool(gen_yaml *y, yaml_node_t *n, const char *what, bool *out);
/* n must be a sequence (what: "a list"); reports "'what' must be a list, got a mapping". */
int gen_yaml_need_seq(gen_yaml *y, yaml_node_t *n, const char *what);

#endif
