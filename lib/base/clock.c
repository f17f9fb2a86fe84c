/* clock.c — monotonic seconds (clock.h). */
#include "base/clock.h"

#include <time.h>

double dfl_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
