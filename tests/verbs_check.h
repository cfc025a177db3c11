/* The test programs' one failure rule: print the failed condition, the reason and errno, with
 * the program's name (VERBS_PROG, defined before this header), and exit 1. */
#pragma once
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, VERBS_PROG ": FAIL %s: ", #cond);             \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno)); \
            exit(1);                                                      \
        }                                                                 \
    } while (0)
