/* rt_json_schema.h - JSON schema -> GBNF (the grammar of the JSON texts a schema accepts),
 * and the built-in grammar of any JSON object (OpenAI's json_object mode).
 *
 * Owns: the converter (rt_json_schema.c). The supported subset: `type` (a name or a list of
 * them: object, array, string, number, integer, boolean, null), `properties`, `required`,
 * `additionalProperties` (false / true / absent: only the listed properties are generated,
 * which every such schema accepts; a schema with no `properties`: an object of any keys whose
 * values follow it), `items` (one schema), `minItems`, `maxItems`, `minLength`,
 * `maxLength`, `enum`, `const`, `anyOf`, `oneOf` (generates one of the alternatives),
 * `format` (date, time, date-time, uuid), `$ref` to "#" or "#/..." inside the document
 * (`$defs`, `definitions`; recursive schemas work), and the annotations (title,
 * description, default, examples, $schema, $id, $comment, deprecated, readOnly,
 * writeOnly), which are ignored. Any other keyword is an error naming it and where it is:
 * "json schema: unsupported keyword 'pattern' at /properties/zip". The required
 * properties are generated first, then any subset of the optional ones, each in the
 * schema's order. Whitespace between tokens is llama.cpp's `space` (at most a newline and
 * 20 blanks), strings are JSON strings of valid UTF-8 without lone surrogate escapes.
 * Counts (maxLength, maxItems, ...) are at most RT_JSON_SCHEMA_MAX_COUNT.
 */
#ifndef RT_JSON_SCHEMA_H
#define RT_JSON_SCHEMA_H

#include <stddef.h>

#define RT_JSON_SCHEMA_MAX_COUNT 10000
#define RT_JSON_SCHEMA_MAX_DEPTH 128 /* nested schemas */

/* schema[0..len) (JSON text) -> GBNF text with start rule `root` (*out, malloc'd,
 * NUL-terminated). 0 ok; -1 + err (RT_ERR_LEN, "json schema: ...") and *out NULL. The result
 * is checked by compiling it (a schema that can only recurse into itself is an error). */
int rt_json_schema_to_gbnf(const char *schema, size_t len, char **out, char *err);

/* GBNF of any JSON object (start rule `root`), with llama.cpp's whitespace rule. */
const char *rt_json_object_gbnf(void);

#endif
