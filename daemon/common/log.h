/* Logging to stderr, one line per event, with journald priority prefixes
 * ("<3>") when stderr is not a terminal. */
#ifndef RUDA_LOG_H
#define RUDA_LOG_H

enum ruda_log_level {
	RUDA_LOG_ERROR = 3,
	RUDA_LOG_WARNING = 4,
	RUDA_LOG_NOTICE = 5,
	RUDA_LOG_INFO = 6,
	RUDA_LOG_DEBUG = 7,
};

void ruda__log_init(int level);
/* The level `name` ("error" .. "debug") names, or -EINVAL. */
int ruda__log_level_parse(const char *name);
void ruda__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) ruda__log(RUDA_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) ruda__log(RUDA_LOG_WARNING, __VA_ARGS__)
#define log_notice(...) ruda__log(RUDA_LOG_NOTICE, __VA_ARGS__)
#define log_info(...) ruda__log(RUDA_LOG_INFO, __VA_ARGS__)
#define log_debug(...) ruda__log(RUDA_LOG_DEBUG, __VA_ARGS__)

#endif
