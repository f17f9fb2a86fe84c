/* shapes.h — `train --task shapes` (shapes.c), called by main.c. */
#ifndef DFL_TOOLS_TRAIN_SHAPES_H
#define DFL_TOOLS_TRAIN_SHAPES_H

/* The whole tool for --task shapes: its own options (train --task shapes --help). Returns
 * the exit code. */
int dfl__train_shapes_main(int argc, char **argv);

#endif
