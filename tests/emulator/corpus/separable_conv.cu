// Separable 2-D convolution of a w x h image with the 5 taps in constant memory, zero outside
// the image: out[y][x] = sum_j,k taps[j] taps[k] in[y + j - R][x + k - R]. Each 16 x 16 block
// loads its tile and a halo of R pixels into shared memory, filters the rows of the tile
// (halo rows included) into a second shared array, then filters its columns.
// Planted bug: the halo is loaded without the bounds check, so border blocks read the image
// before its first row (out of bounds) and beside its edges (the neighbouring row's pixels).
#define R 2
#define TILE 16
#define SPAN (TILE + 2 * R)

__constant__ float taps[2 * R + 1] = {-0.1f, 0.2f, 0.5f, 0.3f, 0.1f};

__global__ void separable_conv(const float* image, float* out, int w, int h) {
    __shared__ float tile[SPAN][SPAN];
    __shared__ float rows[SPAN][TILE];
    int t = threadIdx.y * TILE + threadIdx.x;
    int x0 = blockIdx.x * TILE - R, y0 = blockIdx.y * TILE - R;
    for (int k = t; k < SPAN * SPAN; k += TILE * TILE) {
        int x = x0 + k % SPAN, y = y0 + k / SPAN;
#ifdef PLANTED_BUG
        tile[k / SPAN][k % SPAN] = y < h && x < w ? image[y * w + x] : 0.0f;
#else
        bool inside = x >= 0 && x < w && y >= 0 && y < h;
        tile[k / SPAN][k % SPAN] = inside ? image[y * w + x] : 0.0f;
#endif
    }
    __syncthreads();
    for (int k = t; k < SPAN * TILE; k += TILE * TILE) {
        float sum = 0.0f;
        for (int j = 0; j <= 2 * R; ++j) sum += taps[j] * tile[k / TILE][k % TILE + j];
        rows[k / TILE][k % TILE] = sum;
    }
    __syncthreads();
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    float sum = 0.0f;
    for (int j = 0; j <= 2 * R; ++j) sum += taps[j] * rows[threadIdx.y + j][threadIdx.x];
    if (x < w && y < h) out[y * w + x] = sum;
}
