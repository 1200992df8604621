// Caffe's solver steps for one parameter on the GPU, each in one pass:
// Regularize (L2, or L1 where l1 is not 0), ComputeUpdateValue (Caffe's
// sgd_, nesterov_, adagrad_, rmsprop_, adadelta_ and adam_update_gpu)
// and Net::Update, in the order the CPU side computes them.

#define GRID_STRIDE(i, n)                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   \
         i < (n); i += (long long)blockDim.x * gridDim.x)

// The gradient with the weight decay added: decay * w (L2) or
// decay * sign(w) (L1). As in Caffe a decay of 0 adds nothing, not even
// 0 * an infinite weight.
__device__ inline float regularized(float g, float w, float decay, int l1) {
    float penalty = l1 ? (float)((0.0f < w) - (w < 0.0f)) : w;
    return decay != 0.0f ? g + decay * penalty : g;
}

// SGD: history = momentum * history + rate * diff; diff = history;
// data -= diff.
extern "C" __global__ void sgd_step_f32(long long n, float decay, int l1, float rate,
                                        float momentum, float* data, float* diff,
                                        float* history) {
    GRID_STRIDE(i, n) {
        float w = data[i];
        float g = regularized(diff[i], w, decay, l1);
        float h = momentum * history[i] + rate * g;
        history[i] = h;
        diff[i] = h;
        data[i] = w - h;
    }
}

// Nesterov: the history as SGD's; the update steps back from the old
// history and over the new one: diff = (1 + momentum) * history_new -
// momentum * history_old; data -= diff.
extern "C" __global__ void nesterov_step_f32(long long n, float decay, int l1, float rate,
                                             float momentum, float* data, float* diff,
                                             float* history) {
    GRID_STRIDE(i, n) {
        float w = data[i];
        float g = regularized(diff[i], w, decay, l1);
        float old = history[i];
        float h = momentum * old + rate * g;
        history[i] = h;
        float u = (1.0f + momentum) * h + -momentum * old;
        diff[i] = u;
        data[i] = w - u;
    }
}

// Adam: m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) *
// g^2; diff = rate * m / (sqrt(v) + delta), rate carrying the bias
// correction; data -= diff.
extern "C" __global__ void adam_step_f32(long long n, float decay, int l1, float rate,
                                         float beta1, float beta2, float delta, float* data,
                                         float* diff, float* m, float* v) {
    GRID_STRIDE(i, n) {
        float w = data[i];
        float g = regularized(diff[i], w, decay, l1);
        float mi = (1.0f - beta1) * g + beta1 * m[i];
        float vi = (1.0f - beta2) * (g * g) + beta2 * v[i];
        m[i] = mi;
        v[i] = vi;
        float u = rate * (mi / (sqrtf(vi) + delta));
        diff[i] = u;
        data[i] = w - u;
    }
}

// AdaGrad (keep 1, add 1) and RMSProp (keep rms_decay, add 1 -
// rms_decay): history = keep * history + add * g^2; diff = rate * g /
// (sqrt(history) + delta); data -= diff.
extern "C" __global__ void adaptive_step_f32(long long n, float decay, int l1, float rate,
                                             float keep, float add, float delta, float* data,
                                             float* diff, float* history) {
    GRID_STRIDE(i, n) {
        float w = data[i];
        float g = regularized(diff[i], w, decay, l1);
        float h = add * (g * g) + keep * history[i];
        history[i] = h;
        float u = rate * (g / (sqrtf(h) + delta));
        diff[i] = u;
        data[i] = w - u;
    }
}

// AdaDelta: grads = momentum * grads + (1 - momentum) * g^2; the step
// g * sqrt((updates + delta) / (grads + delta)); updates = momentum *
// updates + (1 - momentum) * step^2; diff = rate * step; data -= diff.
extern "C" __global__ void adadelta_step_f32(long long n, float decay, int l1, float rate,
                                             float momentum, float delta, float* data,
                                             float* diff, float* grads, float* updates) {
    GRID_STRIDE(i, n) {
        float w = data[i];
        float g = regularized(diff[i], w, decay, l1);
        float h = (1.0f - momentum) * (g * g) + momentum * grads[i];
        grads[i] = h;
        float s = g * sqrtf((updates[i] + delta) / (h + delta));
        updates[i] = (1.0f - momentum) * (s * s) + momentum * updates[i];
        float u = rate * s;
        diff[i] = u;
        data[i] = w - u;
    }
}
