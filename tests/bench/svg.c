/*
 * A small SVG writer for the bench's plots: lines with markers over a
 * linear or powers-of-two x axis, a y axis from 0 with round ticks, or bars.
 * Plain SVG 1.1, no scripts or fonts beyond sans-serif.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "bench.h"

#define W 640.0
#define H 400.0
#define LEFT 80.0
#define RIGHT 20.0
#define TOP 40.0
#define BOTTOM 60.0

static const char *colors[BENCH_SVG_MAX_SERIES] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

/* A round step giving about 5 ticks up to `max`. */
static double tick_step(double max)
{
	double raw = max / 5, mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void text(FILE *f, double x, double y, const char *anchor, const char *extra,
		 const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" %s>", x, y, anchor, extra);
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
	}
	fputs("</text>\n", f);
}

static void tick_label(double v, char *buf, size_t len)
{
	double a = fabs(v);
	if (a >= 1e6)
		snprintf(buf, len, "%gM", v / 1e6);
	else if (a >= 1e4)
		snprintf(buf, len, "%gk", v / 1e3);
	else
		snprintf(buf, len, "%g", v);
}

int bench_svg_write(const struct bench_svg_plot *p, const char *name)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s.svg", bench_opt.out_dir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
	for (int s = 0; s < p->nseries; s++)
		for (int i = 0; i < p->series[s].n; i++) {
			double x = p->series[s].x[i], y = p->series[s].y[i];
			if (p->log2_x)
				x = log2(x);
			xmin = fmin(xmin, x);
			xmax = fmax(xmax, x);
			if (isfinite(y))
				ymax = fmax(ymax, y);
		}
	if (!(ymax > 0))
		ymax = 1;
	double step = tick_step(ymax * 1.1), ytop = ceil(ymax * 1.1 / step) * step;
	if (!(xmax > xmin)) {
		xmin -= 1;
		xmax += 1;
	}
	/* room for the end markers */
	double pad = (xmax - xmin) * 0.05;
	xmin -= pad;
	xmax += pad;
	double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
#define PX(x) (LEFT + ((x) - xmin) / (xmax - xmin) * pw)
#define PY(y) (TOP + ph - (y) / ytop * ph)
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		W, H, W, H);
	text(f, W / 2, 22, "middle", "font-size=\"15\"", p->title);
	/* y grid and ticks */
	char label[32];
	for (double y = 0; y <= ytop * 1.0001; y += step) {
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			LEFT, PY(y), W - RIGHT, PY(y));
		tick_label(y, label, sizeof(label));
		text(f, LEFT - 6, PY(y) + 4, "end", "", label);
	}
	if (p->bars) {
		int n = p->nseries;
		double slot = pw / (n ? n : 1);
		for (int s = 0; s < n; s++) {
			double y = p->series[s].n ? p->series[s].y[0] : NAN;
			double x0 = LEFT + slot * s + slot * 0.2;
			if (isfinite(y))
				fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
					   "fill=\"%s\"/>\n",
					x0, PY(y), slot * 0.6, TOP + ph - PY(y), colors[s]);
			text(f, x0 + slot * 0.3, H - BOTTOM + 16, "middle", "", p->series[s].label);
			if (isfinite(y)) {
				tick_label(round(y * 100) / 100, label, sizeof(label));
				text(f, x0 + slot * 0.3, PY(y) - 4, "middle", "", label);
			}
		}
	} else {
		/* x ticks at the first series' points */
		const struct bench_svg_series *s0 = &p->series[0];
		for (int i = 0; i < s0->n; i++) {
			double x = p->log2_x ? log2(s0->x[i]) : s0->x[i];
			tick_label(s0->x[i], label, sizeof(label));
			text(f, PX(x), H - BOTTOM + 16, "middle", "", label);
		}
		for (int s = 0; s < p->nseries; s++) {
			const struct bench_svg_series *se = &p->series[s];
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
				colors[s]);
			for (int i = 0; i < se->n; i++) {
				double x = p->log2_x ? log2(se->x[i]) : se->x[i];
				if (isfinite(se->y[i]))
					fprintf(f, "%.1f,%.1f ", PX(x), PY(se->y[i]));
			}
			fprintf(f, "\"/>\n");
			for (int i = 0; i < se->n; i++) {
				double x = p->log2_x ? log2(se->x[i]) : se->x[i];
				if (isfinite(se->y[i]))
					fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
						PX(x), PY(se->y[i]), colors[s]);
			}
			/* legend */
			double ly = TOP + 14 + 16 * s;
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
				   "stroke-width=\"2\"/>\n",
				LEFT + 12, ly - 4, LEFT + 32, ly - 4, colors[s]);
			text(f, LEFT + 38, ly, "start", "", se->label);
		}
	}
	/* axes */
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
		LEFT, TOP, LEFT, TOP + ph);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
		LEFT, TOP + ph, W - RIGHT, TOP + ph);
	text(f, LEFT + pw / 2, H - 16, "middle", "", p->xlabel);
	char rot[64];
	snprintf(rot, sizeof(rot), "transform=\"rotate(-90 18 %.1f)\"", TOP + ph / 2);
	text(f, 18, TOP + ph / 2, "middle", rot, p->ylabel);
	fprintf(f, "</svg>\n");
#undef PX
#undef PY
	int err = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && !err)
		err = -errno;
	return err;
}
