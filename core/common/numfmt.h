/*
 * numfmt.h - doubles written the way people write them: the shortest decimal that reads back
 * (strtod) to the very same double, e.g. 0.05 and 7.8 rather than 0.050000000000000003 and
 * 7.7999999999999998; a value that needs 17 digits keeps them (0.0099999991650223611).
 *
 * Form: printf's %g shape with the exponent trimmed as JSON writers do ("1e-7", "1e21",
 * "-2.5e-300"); whole numbers below 2^53 in plain digits ("3", "1140369"). No locale: the
 * decimal point is always '.'. Not a number: "nan"; infinities: "inf" / "-inf" (callers that
 * write JSON never pass them). -0 is written "0": a negative zero has no meaning to a reader.
 */
#ifndef DPB_NUMFMT_H
#define DPB_NUMFMT_H

#include <stddef.h>

/* Room for any double in the forms above, the terminating NUL included. */
#define DPB_NUM_MAX 32

/* Write x into out (DPB_NUM_MAX bytes) in the shortest round-trip form above; returns the
 * length written (without the NUL). */
size_t dpb_num(double x, char out[DPB_NUM_MAX]);

/* The same, for use inside a printf argument list: returns out. */
const char *dpb_num_str(double x, char out[DPB_NUM_MAX]);

#endif
