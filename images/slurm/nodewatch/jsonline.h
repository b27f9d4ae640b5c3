/* jsonline: builds one JSON object line (Slurm-free, tested by test_jsonline.c). */
#ifndef SUNK_JSONLINE_H
#define SUNK_JSONLINE_H
#include <stdint.h>
#include <stdio.h>

typedef struct {
	FILE *f;
	char *buf;
	size_t len;
	int first; /* no member written yet in the current object */
} jl_t;

void jl_open(jl_t *j);
/* jl_close ends the line and returns it (malloc'd; the caller frees it). */
char *jl_close(jl_t *j);
/* jl_raw writes s as is; "{" or "[" starts a new list of members. */
void jl_raw(jl_t *j, const char *s);
void jl_key(jl_t *j, const char *key);
/* jl_str writes "key":"value", escaped; a NULL value is written as "". */
void jl_str(jl_t *j, const char *key, const char *value);
void jl_num(jl_t *j, const char *key, int64_t value);
/* jl_elem writes one string of an array; first=1 for the array's first. */
void jl_elem(jl_t *j, const char *value, int first);
/* jl_escape writes s as a JSON string (quotes included) to f. */
void jl_escape(FILE *f, const char *s);
#endif
