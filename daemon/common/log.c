#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int max_level = RUDA_LOG_INFO;
static int prefix_priority;

void ruda__log_init(int level)
{
	max_level = level;
	/* journald (and most supervisors) read "<N>" prefixes; a person at a
	 * terminal does not want them */
	prefix_priority = getenv("JOURNAL_STREAM") != NULL || !isatty(STDERR_FILENO);
}

int ruda__log_level_parse(const char *name)
{
	static const struct {
		const char *name;
		int level;
	} levels[] = {
		{"error", RUDA_LOG_ERROR}, {"warning", RUDA_LOG_WARNING}, {"notice", RUDA_LOG_NOTICE},
		{"info", RUDA_LOG_INFO},   {"debug", RUDA_LOG_DEBUG},
	};
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcmp(name, levels[i].name) == 0)
			return levels[i].level;
	return -EINVAL;
}

void ruda__log(int level, const char *fmt, ...)
{
	if (level > max_level)
		return;
	char line[1024];
	int n = 0;
	if (prefix_priority)
		n = snprintf(line, sizeof(line), "<%d>", level);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* one write per line so lines of concurrent threads never interleave */
	size_t len = strlen(line);
	if (len < sizeof(line) - 1)
		line[len++] = '\n';
	else
		line[sizeof(line) - 2] = '\n', len = sizeof(line) - 1;
	ssize_t ignored = write(STDERR_FILENO, line, len);
	(void)ignored;
}
