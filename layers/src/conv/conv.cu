// Convolution on the GPU: im2col and col2im with kernel, stride, padding
// and dilation per spatial axis over a whole batch, and the moves between the gemm's (cout, batch*P) layout and
// the blob's (batch, cout, P). The same arithmetic as conv/cpu.rs.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// col is (cin*kh*kw) x (batch*oh*ow): row (c, ki, kj), column (image, r, q),
// value x[image, c, r*sh + ki*dh - ph, q*sw + kj*dw - pw], zero in the padding.
extern "C" __global__ void im2col_f32(long long total, int cin, int h, int w, int kh, int kw,
                                      int sh, int sw, int ph, int pw, int dh, int dw, int oh,
                                      int ow, int batch, const float* x, float* col) {
    long long cols = (long long)batch * oh * ow;
    GRID_STRIDE(idx, total) {
        long long row = idx / cols;
        long long j = idx % cols;
        int kj = (int)(row % kw);
        int ki = (int)((row / kw) % kh);
        int c = (int)(row / ((long long)kh * kw));
        int img = (int)(j / ((long long)oh * ow));
        int p = (int)(j % ((long long)oh * ow));
        int ih = (p / ow) * sh + ki * dh - ph;
        int iw = (p % ow) * sw + kj * dw - pw;
        col[idx] = (ih >= 0 && ih < h && iw >= 0 && iw < w)
                       ? x[(((long long)img * cin + c) * h + ih) * w + iw]
                       : 0.0f;
    }
}

// The inverse of im2col: each input pixel gathers every column entry that
// was copied from it (no atomics: one thread per pixel), overwriting dx.
extern "C" __global__ void col2im_f32(long long total, int cin, int h, int w, int kh, int kw,
                                      int sh, int sw, int ph, int pw, int dh, int dw, int oh,
                                      int ow, int batch, const float* col, float* dx) {
    long long cols = (long long)batch * oh * ow;
    GRID_STRIDE(idx, total) {
        int iw = (int)(idx % w);
        int ih = (int)((idx / w) % h);
        int c = (int)((idx / ((long long)w * h)) % cin);
        int img = (int)(idx / ((long long)w * h * cin));
        float sum = 0.0f;
        for (int ki = 0; ki < kh; ++ki) {
            int rs = ih + ph - ki * dh;  // r * sh
            if (rs < 0 || rs % sh != 0 || rs / sh >= oh) continue;
            for (int kj = 0; kj < kw; ++kj) {
                int qs = iw + pw - kj * dw;
                if (qs < 0 || qs % sw != 0 || qs / sw >= ow) continue;
                long long row = ((long long)c * kh + ki) * kw + kj;
                long long j = ((long long)img * oh + rs / sh) * ow + qs / sw;
                sum += col[row * cols + j];
            }
        }
        dx[idx] = sum;
    }
}

// y[image, co, p] = tmp[co, image * P + p] + bias[co].
extern "C" __global__ void scatter_bias_f32(long long total, int cout, int batch, int p,
                                            const float* tmp, const float* bias, float* y) {
    GRID_STRIDE(idx, total) {
        int pp = (int)(idx % p);
        int co = (int)((idx / p) % cout);
        int img = (int)(idx / ((long long)p * cout));
        y[idx] = tmp[(long long)co * batch * p + (long long)img * p + pp] + bias[co];
    }
}

// tmp[co, image * P + p] = dy[image, co, p]: the gradient in the gemm's layout.
extern "C" __global__ void gather_f32(long long total, int cout, int batch, int p,
                                      const float* dy, float* tmp) {
    GRID_STRIDE(idx, total) {
        int pp = (int)(idx % p);
        int co = (int)((idx / p) % cout);
        int img = (int)(idx / ((long long)p * cout));
        tmp[(long long)co * batch * p + (long long)img * p + pp] = dy[idx];
    }
}

// y[image, co, p] += bias[co]: the bias after cuDNN's convolution.
extern "C" __global__ void add_channel_bias_f32(long long total, int cout, int p,
                                                const float* bias, float* y) {
    GRID_STRIDE(i, total) { y[i] += bias[(i / p) % cout]; }
}

// A volume's im2col by tables (conv/cuda.rs builds them from
// conv/volume.rs's taps): col is (cin*K) x (batch*P), row (c, k), column
// (image, p), value x[image, c, taps[k*P + p]], zero where the tap is
// padding (0xffffffff).
extern "C" __global__ void im2col_taps_f32(long long total, int cin, long long plane,
                                           int kernel_points, long long points, int batch,
                                           const unsigned int* taps, const float* x,
                                           float* col) {
    long long cols = (long long)batch * points;
    GRID_STRIDE(idx, total) {
        long long row = idx / cols, j = idx % cols;
        long long c = row / kernel_points, k = row % kernel_points;
        long long img = j / points, p = j % points;
        unsigned int tap = taps[k * points + p];
        col[idx] = tap == 0xffffffffu ? 0.0f : x[(img * cin + c) * plane + tap];
    }
}

// Its inverse: input point q of each channel and image gathers the
// column entries read from it, entries[starts[q]..starts[q + 1]] (each
// k*P + p, increasing: the order the CPU adds them), overwriting dx.
extern "C" __global__ void col2im_taps_f32(long long total, int cin, long long plane,
                                           int kernel_points, long long points, int batch,
                                           const unsigned int* starts,
                                           const unsigned int* entries, const float* col,
                                           float* dx) {
    long long cols = (long long)batch * points;
    GRID_STRIDE(idx, total) {
        long long q = idx % plane;
        long long c = (idx / plane) % cin;
        long long img = idx / (plane * cin);
        float sum = 0.0f;
        for (unsigned int e = starts[q]; e < starts[q + 1]; ++e) {
            long long kp = entries[e];
            long long row = c * kernel_points + kp / points;
            sum += col[row * cols + img * points + kp % points];
        }
        dx[idx] = sum;
    }
}

// Depthwise convolution (group = input channels = output channels, one
// kh x kw kernel per channel, MobileNet's 3x3 layers): each output pixel
// sums its own taps, in the order im2col's row (ki, kj) puts them. One
// gemm of one row per channel would be thousands of launches a net.
extern "C" __global__ void depthwise_forward_f32(long long total, int channels, int h, int w,
                                                 int kh, int kw, int sh, int sw, int ph, int pw,
                                                 int dh, int dw, int oh, int ow, int batch,
                                                 const float* x, const float* weight,
                                                 const float* bias, float* y) {
    GRID_STRIDE(idx, total) {
        int q = (int)(idx % ow);
        int r = (int)((idx / ow) % oh);
        long long plane = idx / ((long long)oh * ow);  // image * channels + c
        int c = (int)(plane % channels);
        const float* xp = x + plane * h * w;
        const float* wp = weight + (long long)c * kh * kw;
        float sum = 0.0f;
        for (int ki = 0; ki < kh; ++ki) {
            int ih = r * sh + ki * dh - ph;
            if (ih < 0 || ih >= h) continue;
            for (int kj = 0; kj < kw; ++kj) {
                int iw = q * sw + kj * dw - pw;
                if (iw < 0 || iw >= w) continue;
                sum += wp[ki * kw + kj] * xp[(long long)ih * w + iw];
            }
        }
        y[idx] = sum + bias[c];
    }
}

// Its input gradient: each input pixel gathers the outputs that read it,
// each times its tap's weight, overwriting dx (as col2im does).
extern "C" __global__ void depthwise_input_grad_f32(long long total, int channels, int h, int w,
                                                    int kh, int kw, int sh, int sw, int ph,
                                                    int pw, int dh, int dw, int oh, int ow,
                                                    int batch, const float* dy,
                                                    const float* weight, float* dx) {
    GRID_STRIDE(idx, total) {
        int iw = (int)(idx % w);
        int ih = (int)((idx / w) % h);
        long long plane = idx / ((long long)h * w);
        int c = (int)(plane % channels);
        const float* dyp = dy + plane * oh * ow;
        const float* wp = weight + (long long)c * kh * kw;
        float sum = 0.0f;
        for (int ki = 0; ki < kh; ++ki) {
            int rs = ih + ph - ki * dh;  // r * sh
            if (rs < 0 || rs % sh != 0 || rs / sh >= oh) continue;
            for (int kj = 0; kj < kw; ++kj) {
                int qs = iw + pw - kj * dw;
                if (qs < 0 || qs % sw != 0 || qs / sw >= ow) continue;
                sum += wp[ki * kw + kj] * dyp[(long long)(rs / sh) * ow + qs / sw];
            }
        }
        dx[idx] = sum;
    }
}

// Its weight gradient: one thread per weight (c, ki, kj) sums, image by
// image and pixel by pixel, the output's gradient times the input its
// tap read, and adds the sum to dweight (Caffe accumulates).
extern "C" __global__ void depthwise_weight_grad_f32(long long total, int channels, int h, int w,
                                                     int kh, int kw, int sh, int sw, int ph,
                                                     int pw, int dh, int dw, int oh, int ow,
                                                     int batch, const float* x, const float* dy,
                                                     float* dweight) {
    GRID_STRIDE(idx, total) {
        int kj = (int)(idx % kw);
        int ki = (int)((idx / kw) % kh);
        int c = (int)(idx / ((long long)kh * kw));
        float sum = 0.0f;
        for (int img = 0; img < batch; ++img) {
            long long plane = (long long)img * channels + c;
            const float* xp = x + plane * h * w;
            const float* dyp = dy + plane * oh * ow;
            for (int r = 0; r < oh; ++r) {
                int ih = r * sh + ki * dh - ph;
                if (ih < 0 || ih >= h) continue;
                for (int q = 0; q < ow; ++q) {
                    int iw = q * sw + kj * dw - pw;
                    if (iw < 0 || iw >= w) continue;
                    sum += dyp[(long long)r * ow + q] * xp[(long long)ih * w + iw];
                }
            }
        }
        dweight[idx] += sum;
    }
}
