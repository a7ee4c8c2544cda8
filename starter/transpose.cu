// transpose: out = in^T, where in is rows x cols and out is cols x rows (row-major float32):
//   out[c * rows + r] = in[r * cols + c].
// Launch: block (TILE, BLOCK_ROWS), grid (ceil(cols / TILE), ceil(rows / TILE)); a block moves one
// TILE x TILE tile, each thread TILE / BLOCK_ROWS of its elements. Read assignments/transpose/README.md.

#ifndef TILE
#define TILE 32  // the grader passes -DTILE=.. -DBLOCK_ROWS=..
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

__global__ void transpose(const float* in, float* out, int rows, int cols) {
    // TODO: __shared__ float tile[TILE][TILE + 1];  (the + 1 keeps a column read off one bank)
    // TODO: read the block's input tile row by row (consecutive threads, consecutive columns),
    //       rows j = threadIdx.y, threadIdx.y + BLOCK_ROWS, ..., guarded against rows and cols.
    // TODO: __syncthreads();
    // TODO: write the transposed tile, again consecutive threads on consecutive output columns,
    //       reading the tile by columns, guarded against the output's cols x rows shape.
}
