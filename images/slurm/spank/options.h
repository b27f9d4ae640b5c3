/* sunk_container's flags as the user gave them (options.c). */
#ifndef SUNK_CONTAINER_OPTIONS_H
#define SUNK_CONTAINER_OPTIONS_H

#include <slurm/spank.h>

#include "helper.h"

/* String flags (O_* in helper.h), NULL when not given; the helper parses them again. */
extern char *str_opt[O_NSTR];
extern const char *str_name[O_NSTR];
/* Tri-state flags: -1 unset, 0 the --no- form (or --container-readonly), 1 the positive. */
enum { T_HOME, T_REMAP, T_ENTRY, T_WRITABLE, T_ENTRYLOG, T_NTRI };
extern int tri_opt[T_NTRI];
extern const char *tri_pos[T_NTRI], *tri_neg[T_NTRI];

/* register_options registers every flag (slurm_spank_init); -1 on failure, logged. */
int register_options(spank_t sp);
/* requested: whether the step asked for a container. */
int requested(void);

#endif
