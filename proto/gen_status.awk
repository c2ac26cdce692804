# The status codes, from their one definition (enum Status of ruda.proto):
#   awk -v what=header -f proto/gen_status.awk proto/ruda.proto   <ruda/status.h>
#   awk -v what=table -f proto/gen_status.awk proto/ruda.proto    ruda_strerror
# Each value must follow a comment line `// "strerror text": doc comment`;
# anything else in the enum fails the build (exit 1), so no code lacks a text.
# POSIX awk only (mawk, gawk, busybox): the build needs nothing more.

function fail(msg) {
	printf "proto/gen_status.awk: %s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"
	failed = 1
	exit 1
}

# a C string literal's body: the proto comment holds plain text
function cstr(s) {
	gsub(/\\/, "\\\\", s)
	gsub(/"/, "\\\"", s)
	return s
}

/^enum Status \{/ { inside = 1; next }
inside && /^\}/ { inside = 0; done = 1; next }
inside {
	line = $0
	sub(/^[ \t]+/, "", line)
	sub(/[ \t]+$/, "", line)
	if (line == "")
		next
	if (line ~ /^\/\/ "[^"]*": /) {
		if (pending)
			fail("two comment lines before one value")
		text = line
		sub(/^\/\/ "/, "", text)
		doc = text
		sub(/": .*$/, "", text)
		sub(/^[^"]*": /, "", doc)
		if (text == "" || doc == "")
			fail("empty text or doc comment")
		pending = 1
		next
	}
	if (line ~ /^[A-Z][A-Z0-9_]* = [0-9]+;$/) {
		if (!pending)
			fail("no `// \"text\": doc` line above " line)
		name = line
		sub(/ = .*$/, "", name)
		value = line
		sub(/^[^=]*= /, "", value)
		sub(/;$/, "", value)
		if (name in seen_name)
			fail("name " name " twice")
		if (value in seen_value)
			fail("value " value " twice")
		seen_name[name] = 1
		seen_value[value] = 1
		n++
		names[n] = name
		values[n] = value
		texts[n] = text
		docs[n] = doc
		pending = 0
		next
	}
	fail("not a status value or its comment: " line)
}

END {
	if (failed)
		exit 1
	if (!done || n == 0) {
		printf "proto/gen_status.awk: no enum Status in %s\n", FILENAME > "/dev/stderr"
		exit 1
	}
	if (pending) {
		printf "proto/gen_status.awk: a comment line ends enum Status\n" > "/dev/stderr"
		exit 1
	}
	if (what == "header")
		header()
	else if (what == "table")
		table()
	else {
		printf "proto/gen_status.awk: -v what=header or -v what=table\n" > "/dev/stderr"
		exit 1
	}
}

function header(	i) {
	print "/* Generated from enum Status of proto/ruda.proto by proto/gen_status.awk:"
	print " * edit the proto, not this file. Included by <ruda/ruda.h>. */"
	print "#ifndef RUDA_STATUS_H"
	print "#define RUDA_STATUS_H"
	print ""
	print "#ifdef __cplusplus"
	print "extern \"C\" {"
	print "#endif"
	print ""
	print "/* The status of every fallible call: the same names (RUDA_ + the"
	print " * proto's) and values as `ruda.Status` on the wire. RUDA_OK is 0. */"
	print "typedef enum ruda_status {"
	for (i = 1; i <= n; i++) {
		printf "\t/* %s */\n", docs[i]
		printf "\tRUDA_%s = %s,\n", names[i], values[i]
	}
	print "} ruda_status;"
	print ""
	print "/* A static string describing `status`; never NULL (\"unknown status\""
	print " * for a value this library does not know). */"
	print "const char *ruda_strerror(ruda_status status);"
	print ""
	print "#ifdef __cplusplus"
	print "}"
	print "#endif"
	print ""
	print "#endif"
}

function table(	i) {
	print "/* Generated from enum Status of proto/ruda.proto by proto/gen_status.awk:"
	print " * edit the proto, not this file. Linked into libruda, rudactl and rudad. */"
	print "#include <stddef.h>"
	print ""
	print "#include <ruda/status.h>"
	print ""
	print "#include \"status_table.h\""
	print ""
	print "static const struct {"
	print "\tconst char *name, *text;"
	print "} table[] = {"
	for (i = 1; i <= n; i++)
		printf "\t[RUDA_%s] = {\"%s\", \"%s\"},\n", names[i], names[i], cstr(texts[i])
	print "};"
	print ""
	print "const char *ruda_strerror(ruda_status status)"
	print "{"
	print "\tconst char *t = (unsigned)status < sizeof(table) / sizeof(table[0]) ? table[status].text : NULL;"
	print "\treturn t ? t : \"unknown status\";"
	print "}"
	print ""
	print "const char *ruda__status_name(int status)"
	print "{"
	print "\treturn (unsigned)status < sizeof(table) / sizeof(table[0]) ? table[status].name : NULL;"
	print "}"
	print ""
	print "int ruda__status_limit(void)"
	print "{"
	print "\treturn (int)(sizeof(table) / sizeof(table[0]));"
	print "}"
}
