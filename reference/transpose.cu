// transpose: out = in^T, where in is rows x cols and out is cols x rows (row-major float32):
//   out[c * rows + r] = in[r * cols + c].
// Launch: block (TILE, BLOCK_ROWS), grid (ceil(cols / TILE), ceil(rows / TILE)); a block moves one
// TILE x TILE tile, each thread TILE / BLOCK_ROWS of its elements. Read assignments/transpose/README.md.
// BEGIN SOLUTION
//
// transpose reference: the block stages one TILE x TILE tile of `in` in shared memory, reading
// it row by row (coalesced), then writes it out transposed, again row by row (coalesced).
// The tile's rows are padded to TILE + 1 floats so that reading a tile column touches 32
// different banks. Each thread moves TILE / BLOCK_ROWS elements each way.
// END SOLUTION

#ifndef TILE
#define TILE 32  // the grader passes -DTILE=.. -DBLOCK_ROWS=..
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

// BEGIN SOLUTION
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;

    int c = blockIdx.x * TILE + tx;
    int r = blockIdx.y * TILE + ty;
    #pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (c < cols && r + j < rows) tile[ty + j][tx] = in[(r + j) * cols + c];
    __syncthreads();

    c = blockIdx.y * TILE + tx;  // now a column of out, i.e. a row of in
    r = blockIdx.x * TILE + ty;  // now a row of out, i.e. a column of in
    #pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS)
        if (c < rows && r + j < cols) out[(r + j) * rows + c] = tile[tx][ty + j];
}
// END SOLUTION
// BEGIN PROMPT
// __global__ void transpose(const float* in, float* out, int rows, int cols) {
//     // TODO: __shared__ float tile[TILE][TILE + 1];  (the + 1 keeps a column read off one bank)
//     // TODO: read the block's input tile row by row (consecutive threads, consecutive columns),
//     //       rows j = threadIdx.y, threadIdx.y + BLOCK_ROWS, ..., guarded against rows and cols.
//     // TODO: __syncthreads();
//     // TODO: write the transposed tile, again consecutive threads on consecutive output columns,
//     //       reading the tile by columns, guarded against the output's cols x rows shape.
// }
// END PROMPT
