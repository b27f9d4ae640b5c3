#define _GNU_SOURCE
#include "jsonline.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void jl_open(jl_t *j)
{
	j->buf = NULL;
	j->len = 0;
	j->f = open_memstream(&j->buf, &j->len);
	if (!j->f)
		abort();
	j->first = 1;
}

char *jl_close(jl_t *j)
{
	fclose(j->f);
	return j->buf;
}

void jl_raw(jl_t *j, const char *s)
{
	fputs(s, j->f);
	size_t n = strlen(s);
	j->first = n > 0 && (s[n - 1] == '{' || s[n - 1] == '[');
}

void jl_escape(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

void jl_key(jl_t *j, const char *key)
{
	if (!j->first)
		fputc(',', j->f);
	j->first = 0;
	jl_escape(j->f, key);
	fputc(':', j->f);
}

void jl_str(jl_t *j, const char *key, const char *value)
{
	jl_key(j, key);
	jl_escape(j->f, value);
}

void jl_num(jl_t *j, const char *key, int64_t value)
{
	jl_key(j, key);
	fprintf(j->f, "%" PRId64, value);
}

void jl_elem(jl_t *j, const char *value, int first)
{
	if (!first)
		fputc(',', j->f);
	jl_escape(j->f, value);
}
