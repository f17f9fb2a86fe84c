/* clock.h — the library's one clock: monotonic seconds for progress bars, per-phase
 * timers and reports (never wall-clock dates, which can jump). */
#ifndef DFL_CLOCK_H
#define DFL_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC); differences are durations. */
double dfl_clock_seconds(void);

#endif
