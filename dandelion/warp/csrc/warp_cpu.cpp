// The fused warp on the CPU: exponential map, pole-aware ghost rows and bilinear sampling, forward and backward.
//
// The CPU counterpart of dandelion/warp/triton_sample.py, built by dandelion/warp/cpp_sample.py with
// torch.utils.cpp_extension.load. Same math as dandelion/warp/index.py (the warp index and its Jacobian) and
// dandelion/warp/sample.py (grid_sample of the ghost-padded image, dandelion/warp/padding.py), in one pass:
// per head n (parallel over heads; each head owns its planes, so the backward scatters without atomics), per
// block of up to BLK nodes of a grid row,
//   A. the index (and in the backward its Jacobian) of every node: vectorised float32 arithmetic with
//      polynomial sin/cos/atan2 (Cephes, about 1-2 ulp; |d| above 8192 rad is redone with the C library's),
//      float64 through the C library;
//   B. the four corners of every node in the data planes (ghost rows beyond the poles are the rows nearest the
//      poles at longitude + pi, the mean of the two columns around it for odd nlon; the periodic column is
//      column 0): no padded image is ever built;
//   C. over the head's channels at once (its values channels last, one vector per node), the bilinear sum
//      (forward), or the scatter of the value gradient and the derivatives of the sample in the padded row and
//      column summed over channels (backward), applied through the Jacobian at the end.
// Zero displacement is the identity bit for bit (the increments are gated to exactly zero).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "warp_index.h"

namespace {

using namespace dandelion_warp;

constexpr int BLK = 256;

// Per-block scratch: indices, Jacobian, corners (NC = 4 corners, 8 for odd nlon: two columns each), weights.
template <typename T, int NC>
struct alignas(64) Block {
  T rows[BLK], cols[BLK], ra[BLK], rb[BLK], ca[BLK], cb[BLK];
  T fr[BLK], fc[BLK], mr[BLK], mc[BLK], w[4][BLK], acc_r[BLK], acc_c[BLK];
  int32_t off[NC][BLK];
};

// Pass A: the index of nodes j0 .. j0 + len of row i (float32 vectorised; large |d| redone with the C library).
template <typename T, bool UNIFORM, bool JAC, int NC>
inline void index_values(Block<T, NC>& blk, const T* da, const T* db, int64_t i, int64_t j0, int len, const Tables<T>& g) {
  const T st = g.sin_colat[i], ct = g.cos_colat[i], colat_i = g.colat[i], i1 = static_cast<T>(i + 1);
  if constexpr (std::is_same<T, float>::value) {
    int big = 0;
    for (int k = 0; k < len; ++k) {
      Index<T> x = warp_index<T, FastMath, UNIFORM, JAC>(da[k], db[k], st, ct, colat_i, i1, static_cast<T>(j0 + k), g);
      blk.rows[k] = x.rows, blk.cols[k] = x.cols;
      if (JAC) blk.ra[k] = x.ra, blk.rb[k] = x.rb, blk.ca[k] = x.ca, blk.cb[k] = x.cb;
      big |= !(da[k] * da[k] + db[k] * db[k] < 6.7e7f) ? 1 : 0;  // |d| >= 8192 or not finite
    }
    if (!big) return;
  }
  for (int k = 0; k < len; ++k) {
    if (std::is_same<T, float>::value && da[k] * da[k] + db[k] * db[k] < T(6.7e7)) continue;
    Index<T> x = warp_index<T, LibMath, UNIFORM, JAC>(da[k], db[k], st, ct, colat_i, i1, static_cast<T>(j0 + k), g);
    blk.rows[k] = x.rows, blk.cols[k] = x.cols;
    if (JAC) blk.ra[k] = x.ra, blk.rb[k] = x.rb, blk.ca[k] = x.ca, blk.cb[k] = x.cb;
  }
}

template <typename T, bool UNIFORM, bool JAC, int NC>
inline void index_block(Block<T, NC>& blk, const T* da, const T* db, int64_t i, int64_t j0, int len, const Tables<T>& g) {
  index_values<T, UNIFORM, JAC, NC>(blk, da, db, i, j0, len, g);
  if (UNIFORM) return;
  for (int k = 0; k < len; ++k) {
    T slope;
    blk.rows[k] = row_lookup(blk.rows[k], g, slope);
    if (JAC) blk.ra[k] *= slope, blk.rb[k] *= slope;
  }
}

// Pass B: corners and weights. Padded row p (0: north ghost, nlat + 1: south ghost, else data row p - 1) is read
// at p0 = min(floor(rows), nlat) and p0 + 1; NaN indices give NaN weights (and safe corners).
template <typename T, bool ODD, int NC>
inline void corner_block(Block<T, NC>& blk, int len, const Tables<T>& g) {
  const int nlat = static_cast<int>(g.nlat), nlon = static_cast<int>(g.nlon);
  const int gn = static_cast<int>(g.gn), gs = static_cast<int>(g.gs), h = nlon / 2;
  const T fnlon = static_cast<T>(nlon);
  const T sy = T(2) / static_cast<T>(g.hp - 1), sx = T(2) / static_cast<T>(g.wp - 1);  // powers of two
  const T half_hp = static_cast<T>(g.hp - 1) / 2, half_wp = static_cast<T>(g.wp - 1) / 2;
  const T top_y = static_cast<T>(g.hp - 1), top_x = static_cast<T>(g.wp - 1);
  for (int k = 0; k < len; ++k) {
    const T rows = blk.rows[k], cols = blk.cols[k];
    const T poison = (rows - rows) + (cols - cols);  // 0, or NaN for a NaN index
    // the eager warp's coordinates in its (hp, wp) padded image, rounding included: the columns wrapped by one
    // add (sampler.py sample_grid, near=True), normalised to [-1, 1] and back (grid_sample, align_corners=True)
    const T cw = cols < 0 ? cols + fnlon : (cols >= fnlon ? cols - fnlon : cols);
    const T y = (rows * sy - 1 + 1) * half_hp;
    const T x = (cw * sx - 1 + 1) * half_wp;
    // grid_sample's border rule on that image: no gradient in a coordinate on its edge
    blk.mr[k] = (y > 0 && y < top_y) ? T(1) : T(0);
    blk.mc[k] = (x > 0 && x < top_x) ? T(1) : T(0);
    const T r = y > 0 ? y : T(0);  // NaN -> 0 (the weights carry the NaN)
    T p0f = std::floor(r);
    p0f = p0f < static_cast<T>(nlat) ? p0f : static_cast<T>(nlat);  // row nlat + 1 is read as p0 = nlat, fr = 1
    const T fr = r - p0f;
    const T xc = x > 0 ? x : T(0);
    T c0f = std::floor(xc);
    c0f = c0f < fnlon - 1 ? c0f : fnlon - 1;  // column nlon (periodic: column 0) is read as nlon - 1, fc = 1
    const T fc = xc - c0f;
    const int p0 = static_cast<int>(p0f), c0 = static_cast<int>(c0f);
    const int c1 = c0 + 1 == nlon ? 0 : c0 + 1;
    blk.fr[k] = fr, blk.fc[k] = fc;
    blk.w[0][k] = (1 - fr) * (1 - fc) + poison;
    blk.w[1][k] = (1 - fr) * fc;
    blk.w[2][k] = fr * (1 - fc);
    blk.w[3][k] = fr * fc;
    for (int dp = 0; dp < 2; ++dp) {
      int p = p0 + dp;
      bool ghost = p == 0 || p == nlat + 1;
      int row = p == 0 ? gn : (p == nlat + 1 ? gs : p - 1);
      for (int dq = 0; dq < 2; ++dq) {
        int q = dq ? c1 : c0;
        int qa = q + h >= nlon ? q + h - nlon : q + h;
        qa = ghost ? qa : q;
        blk.off[ODD ? 4 * dp + 2 * dq : 2 * dp + dq][k] = row * nlon + qa;
        if (ODD) {
          int qb = qa + 1 == nlon ? 0 : qa + 1;
          blk.off[4 * dp + 2 * dq + 1][k] = row * nlon + (ghost ? qb : q);
        }
      }
    }
  }
}

template <typename T>
struct Args {
  const T* values;  // channels first (the forward's input)
  T* values_cl;     // channels last: the forward's copy kept for the backward (or null), the backward's input
  const T* d;
  const T* g_out;
  T* out;
  T* g_values;
  T* g_d;
  int64_t n, c;
};

// Pass C works on one head's values in channels-last order (node-major: a node's C channels side by side): the
// forward copies them there (into the tensor the backward keeps, or a scratch buffer), the backward scatters the
// value gradient into a scratch buffer in that order and copies it back. A corner is then C contiguous values, and
// the channel loops below vectorise (C a compile-time constant for the common 4, 8, 16 and 32 channels per head).
template <typename T, int CC>
void to_channels_last(const T* __restrict__ src, T* __restrict__ dst, int64_t c_rt, int64_t npix) {
  const int64_t C = CC > 0 ? CC : c_rt;
  for (int64_t p = 0; p < npix; ++p)
    for (int64_t ch = 0; ch < C; ++ch) dst[p * C + ch] = src[ch * npix + p];
}

template <typename T, int CC>
void to_channels_first(const T* __restrict__ src, T* __restrict__ dst, int64_t c_rt, int64_t npix) {
  const int64_t C = CC > 0 ? CC : c_rt;
  for (int64_t p = 0; p < npix; ++p)
    for (int64_t ch = 0; ch < C; ++ch) dst[ch * npix + p] = src[p * C + ch];
}

// The channel vectors of a node: GCC/Clang vector extensions (one register for 4, 8 or 16 float32 channels on
// AVX-512; lowered to narrower registers where the CPU has none). Elsewhere, plain loops over the channels.
#if defined(__GNUC__)
#define WARP_VECTORS 1
template <typename T, int CC>
struct Lanes {
  typedef T type __attribute__((vector_size(sizeof(T) * CC)));
};
template <typename V, typename T>
WARP_INLINE V load_lanes(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V, typename T>
WARP_INLINE void store_lanes(T* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof(V));
}
#endif

// The forward of one block: per node, the bilinear sum of its four corners, all channels at once.
template <typename T, bool ODD, int NC, int CC>
inline void forward_block(const T* __restrict__ vt, T* __restrict__ out, int64_t c_rt, int64_t npix, int len,
                          const Block<T, NC>& blk) {
#ifdef WARP_VECTORS
  if constexpr (CC > 0 && !ODD) {
    using V = typename Lanes<T, CC>::type;
    for (int k = 0; k < len; ++k) {
      V a = load_lanes<V>(vt + int64_t(blk.off[0][k]) * CC) * (V{} + blk.w[0][k]);
      for (int q = 1; q < 4; ++q) a += load_lanes<V>(vt + int64_t(blk.off[q][k]) * CC) * (V{} + blk.w[q][k]);
      for (int ch = 0; ch < CC; ++ch) out[ch * npix + k] = a[ch];
    }
    return;
  }
#endif
  const int64_t C = c_rt;
  std::vector<T> a(C);
  for (int k = 0; k < len; ++k) {
    std::fill(a.begin(), a.end(), T(0));
    for (int q = 0; q < 4; ++q) {
      const T w = blk.w[q][k];
      const T* f = vt + int64_t(blk.off[ODD ? 2 * q : q][k]) * C;
      const T* f2 = vt + int64_t(blk.off[ODD ? 2 * q + 1 : q][k]) * C;
      for (int64_t ch = 0; ch < C; ++ch) a[ch] += (ODD ? T(0.5) * (f[ch] + f2[ch]) : f[ch]) * w;
    }
    for (int64_t ch = 0; ch < C; ++ch) out[ch * npix + k] = a[ch];
  }
}

// The backward of one block: per node, the value gradient (the output gradient times the weights, added to the
// four corners) and the derivatives of the sample in the padded row and column, summed over channels.
template <typename T, bool ODD, bool NEED_V, bool NEED_D, int NC, int CC>
inline void backward_block(const T* __restrict__ vt, T* __restrict__ gvt, const T* __restrict__ go, int64_t c_rt,
                           int64_t npix, int len, Block<T, NC>& blk) {
#ifdef WARP_VECTORS
  if constexpr (CC > 0 && !ODD) {
    using V = typename Lanes<T, CC>::type;
    for (int k = 0; k < len; ++k) {
      V g;
      for (int ch = 0; ch < CC; ++ch) g[ch] = go[ch * npix + k];
      if (NEED_D) {
        const T fr = blk.fr[k], fc = blk.fc[k];
        V f[4];
        for (int q = 0; q < 4; ++q) f[q] = load_lanes<V>(vt + int64_t(blk.off[q][k]) * CC);
        const V dr = g * ((f[2] - f[0]) * (1 - fc) + (f[3] - f[1]) * fc);
        const V dc = g * ((f[1] - f[0]) * (1 - fr) + (f[3] - f[2]) * fr);
        T acc_r = 0, acc_c = 0;
        for (int ch = 0; ch < CC; ++ch) acc_r += dr[ch], acc_c += dc[ch];
        blk.acc_r[k] = acc_r, blk.acc_c[k] = acc_c;
      }
      if (NEED_V)
        for (int q = 0; q < 4; ++q) {
          T* t = gvt + int64_t(blk.off[q][k]) * CC;
          store_lanes(t, load_lanes<V>(t) + g * blk.w[q][k]);
        }
    }
    return;
  }
#endif
  const int64_t C = c_rt;
  std::vector<T> g(C);
  for (int k = 0; k < len; ++k) {
    for (int64_t ch = 0; ch < C; ++ch) g[ch] = go[ch * npix + k];
    if (NEED_D) {
      const T fr = blk.fr[k], fc = blk.fc[k];
      T acc_r = 0, acc_c = 0;
      for (int64_t ch = 0; ch < C; ++ch) {
        T v[4];
        for (int q = 0; q < 4; ++q) {
          const T a = vt[int64_t(blk.off[ODD ? 2 * q : q][k]) * C + ch];
          v[q] = ODD ? T(0.5) * (a + vt[int64_t(blk.off[2 * q + 1][k]) * C + ch]) : a;
        }
        acc_r += g[ch] * ((v[2] - v[0]) * (1 - fc) + (v[3] - v[1]) * fc);
        acc_c += g[ch] * ((v[1] - v[0]) * (1 - fr) + (v[3] - v[2]) * fr);
      }
      blk.acc_r[k] = acc_r, blk.acc_c[k] = acc_c;
    }
    if (NEED_V)
      for (int q = 0; q < 4; ++q) {
        const T w = ODD ? T(0.5) * blk.w[q][k] : blk.w[q][k];
        T* t = gvt + int64_t(blk.off[ODD ? 2 * q : q][k]) * C;
        for (int64_t ch = 0; ch < C; ++ch) t[ch] += g[ch] * w;
        if (ODD) {
          T* t2 = gvt + int64_t(blk.off[2 * q + 1][k]) * C;
          for (int64_t ch = 0; ch < C; ++ch) t2[ch] += g[ch] * w;
        }
      }
  }
}

// One head: forward (BACKWARD false) or backward; NEED_V / NEED_D select the gradients; CC the channels (0: any).
template <typename T, bool UNIFORM, bool ODD, bool BACKWARD, bool NEED_V, bool NEED_D, int CC>
void run_head(const Args<T>& x, int64_t n, const Tables<T>& g, std::vector<T>& vt, std::vector<T>& gvt) {
  constexpr int NC = ODD ? 8 : 4;
  const int64_t npix = g.nlat * g.nlon, plane = n * x.c * npix;
  const T* da = x.d + n * 2 * npix;
  const T* db = da + npix;
  const T* v = nullptr;  // this head's values, channels last
  if (!BACKWARD) {
    T* copy = x.values_cl ? x.values_cl + plane : vt.data();
    to_channels_last<T, CC>(x.values + plane, copy, x.c, npix);
    v = copy;
  } else if (NEED_D) {
    v = x.values_cl + plane;
  }
  if (BACKWARD && NEED_V) std::fill(gvt.begin(), gvt.end(), T(0));
  Block<T, NC> blk;  // about 24 KiB (float32, odd nlon) to 40 KiB (float64) of stack
  for (int64_t i = 0; i < g.nlat; ++i) {
    for (int64_t j0 = 0; j0 < g.nlon; j0 += BLK) {
      const int len = static_cast<int>(std::min<int64_t>(BLK, g.nlon - j0));
      const int64_t base = i * g.nlon + j0;
      index_block<T, UNIFORM, BACKWARD && NEED_D, NC>(blk, da + base, db + base, i, j0, len, g);
      corner_block<T, ODD, NC>(blk, len, g);
      if (!BACKWARD) {
        forward_block<T, ODD, NC, CC>(v, x.out + plane + base, x.c, npix, len, blk);
        continue;
      }
      backward_block<T, ODD, NEED_V, NEED_D, NC, CC>(v, gvt.data(), x.g_out + plane + base, x.c, npix, len, blk);
      if (NEED_D) {
        T* ga = x.g_d + n * 2 * npix + base;
        T* gb = ga + npix;
        for (int k = 0; k < len; ++k) {
          const T acc_r = blk.acc_r[k] * blk.mr[k], acc_c = blk.acc_c[k] * blk.mc[k];
          ga[k] = acc_r * blk.ra[k] + acc_c * blk.ca[k];
          gb[k] = acc_r * blk.rb[k] + acc_c * blk.cb[k];
        }
      }
    }
  }
  if (BACKWARD && NEED_V) to_channels_first<T, CC>(gvt.data(), x.g_values + plane, x.c, npix);
}

template <typename T, bool UNIFORM, bool ODD, bool BACKWARD, bool NEED_V, bool NEED_D>
void run_head_c(const Args<T>& x, int64_t n, const Tables<T>& g, std::vector<T>& vt, std::vector<T>& gvt) {
  if (std::is_same<T, float>::value && !ODD) {  // float32, even nlon: channels per head as a constant
    if (x.c == 4) return run_head<T, UNIFORM, ODD, BACKWARD, NEED_V, NEED_D, 4>(x, n, g, vt, gvt);
    if (x.c == 8) return run_head<T, UNIFORM, ODD, BACKWARD, NEED_V, NEED_D, 8>(x, n, g, vt, gvt);
    if (x.c == 16) return run_head<T, UNIFORM, ODD, BACKWARD, NEED_V, NEED_D, 16>(x, n, g, vt, gvt);
    if (x.c == 32) return run_head<T, UNIFORM, ODD, BACKWARD, NEED_V, NEED_D, 32>(x, n, g, vt, gvt);
  }
  run_head<T, UNIFORM, ODD, BACKWARD, NEED_V, NEED_D, 0>(x, n, g, vt, gvt);
}

template <typename T, bool BACKWARD, bool NEED_V, bool NEED_D>
void run_all(const Args<T>& x, const Tables<T>& g) {
  const bool odd = g.nlon % 2 == 1, uniform = g.uniform;
  at::parallel_for(0, x.n, 1, [&](int64_t n0, int64_t n1) {
    const int64_t size = x.c * g.nlat * g.nlon;  // one head's values, channels last (and its gradient)
    std::vector<T> vt(!BACKWARD && !x.values_cl ? size : 0), gvt(BACKWARD && NEED_V ? size : 0);
    for (int64_t n = n0; n < n1; ++n) {
      if (uniform && !odd) run_head_c<T, true, false, BACKWARD, NEED_V, NEED_D>(x, n, g, vt, gvt);
      if (uniform && odd) run_head_c<T, true, true, BACKWARD, NEED_V, NEED_D>(x, n, g, vt, gvt);
      if (!uniform && !odd) run_head_c<T, false, false, BACKWARD, NEED_V, NEED_D>(x, n, g, vt, gvt);
      if (!uniform && odd) run_head_c<T, false, true, BACKWARD, NEED_V, NEED_D>(x, n, g, vt, gvt);
    }
  });
}

template <typename T>
Tables<T> tables_of(at::TensorList t, int64_t nlat, int64_t nlon, at::IntArrayRef grid, at::ArrayRef<double> scalars) {
  Tables<T> g;
  g.sin_colat = t[0].data_ptr<T>();
  g.cos_colat = t[1].data_ptr<T>();
  g.colat = t[2].data_ptr<T>();
  g.row_table = t[3].data_ptr<T>();
  g.row_inv_step = t[4].data_ptr<T>();
  g.bin_row = t[5].data_ptr<int32_t>();
  // rounded to T as the eager path rounds its Python scalars (a float32 tensor times a double: float32 arithmetic)
  g.inv_step = static_cast<T>(scalars[0]), g.col_per_rad = static_cast<T>(scalars[1]);
  g.inv_bin_width = static_cast<T>(scalars[2]);
  g.nlat = nlat, g.nlon = nlon, g.gn = grid[0], g.gs = grid[1], g.nbins = grid[2], g.hp = grid[3], g.wp = grid[4];
  g.uniform = grid[5] != 0;
  return g;
}

void check(const at::Tensor& values, const at::Tensor& d, at::TensorList t, at::IntArrayRef grid,
           at::ArrayRef<double> scalars) {
  // values: the values (forward) or the output gradient (backward), (N, C, nlat, nlon)
  TORCH_CHECK(values.dim() == 4 && d.dim() == 4, "warp_cpu: values (N, C, nlat, nlon) and d (N, 2, nlat, nlon)");
  TORCH_CHECK(d.size(0) == values.size(0) && d.size(1) == 2 && d.size(2) == values.size(2) &&
                  d.size(3) == values.size(3),
              "warp_cpu: d must be (N, 2, nlat, nlon) with the values' N, nlat, nlon");
  TORCH_CHECK(values.is_contiguous() && d.is_contiguous(), "warp_cpu: values and d must be contiguous");
  TORCH_CHECK(values.device().is_cpu() && d.device().is_cpu(), "warp_cpu: CPU tensors only");
  TORCH_CHECK(values.scalar_type() == d.scalar_type(), "warp_cpu: values and d must have one dtype");
  TORCH_CHECK(t.size() == 6 && grid.size() == 6 && scalars.size() == 3,
              "warp_cpu: 6 tables, 6 grid integers and 3 scalars expected");
  const int64_t nlat = values.size(2), nlon = values.size(3);
  TORCH_CHECK(grid[0] >= 0 && grid[0] < nlat && grid[1] >= 0 && grid[1] < nlat && grid[2] >= 1 &&
                  grid[3] >= nlat + 2 && grid[4] >= nlon + 1 && nlat >= 1 && nlon >= 2,
              "warp_cpu: grid integers (gn, gs, nbins, hp, wp, uniform) do not fit the values' grid");
  const int64_t sizes[6] = {nlat, nlat, nlat, nlat + 2, nlat + 1, grid[2]};
  for (int k = 0; k < 6; ++k) {
    TORCH_CHECK(t[k].device().is_cpu() && t[k].is_contiguous() && t[k].numel() == sizes[k],
                "warp_cpu: the sampler's tables must be contiguous CPU tensors that fit the grid");
    TORCH_CHECK(t[k].scalar_type() == (k == 5 ? at::kInt : values.scalar_type()),
                "warp_cpu: the sampler's tables must have the values' dtype (bin_row: int32)");
  }
}

// values (N, C, nlat, nlon) -> (output, the values channels last (N, nlat, nlon, C) for the backward if keep)
std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& values, const at::Tensor& d, at::TensorList tables,
                                           at::IntArrayRef grid, at::ArrayRef<double> scalars, bool keep) {
  check(values, d, tables, grid, scalars);
  auto out = at::empty_like(values);
  const int64_t n = values.size(0), c = values.size(1), nlat = values.size(2), nlon = values.size(3);
  auto values_cl = keep ? values.new_empty({n, nlat, nlon, c}) : values.new_empty({0});
  AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "warp_cpu_forward", [&] {
    Args<scalar_t> x{values.data_ptr<scalar_t>(),
                     keep ? values_cl.data_ptr<scalar_t>() : nullptr,
                     d.data_ptr<scalar_t>(),
                     nullptr,
                     out.data_ptr<scalar_t>(),
                     nullptr,
                     nullptr,
                     n,
                     c};
    run_all<scalar_t, false, false, false>(x, tables_of<scalar_t>(tables, nlat, nlon, grid, scalars));
  });
  return std::make_tuple(out, values_cl);
}

// -> (value gradient, displacement gradient); values_cl: the forward's channels-last copy (needed for need_d)
std::tuple<at::Tensor, at::Tensor> backward(const at::Tensor& grad, const at::Tensor& values_cl, const at::Tensor& d,
                                            at::TensorList tables, at::IntArrayRef grid,
                                            at::ArrayRef<double> scalars, bool need_v, bool need_d) {
  check(grad, d, tables, grid, scalars);
  const int64_t n = grad.size(0), c = grad.size(1), nlat = grad.size(2), nlon = grad.size(3);
  TORCH_CHECK(!need_d || (values_cl.sizes() == at::IntArrayRef({n, nlat, nlon, c}) && values_cl.is_contiguous() &&
                          values_cl.scalar_type() == grad.scalar_type() && values_cl.device().is_cpu()),
              "warp_cpu: the values must come channels last, (N, nlat, nlon, C), as the forward kept them");
  auto g_values = need_v ? at::empty_like(grad) : grad.new_empty({0});  // every entry is written
  auto g_d = need_d ? at::empty_like(d) : d.new_empty({0});
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "warp_cpu_backward", [&] {
    Args<scalar_t> x{nullptr,
                     need_d ? const_cast<scalar_t*>(values_cl.data_ptr<scalar_t>()) : nullptr,
                     d.data_ptr<scalar_t>(),
                     grad.data_ptr<scalar_t>(),
                     nullptr,
                     need_v ? g_values.data_ptr<scalar_t>() : nullptr,
                     need_d ? g_d.data_ptr<scalar_t>() : nullptr,
                     n,
                     c};
    auto g = tables_of<scalar_t>(tables, nlat, nlon, grid, scalars);
    if (need_v && need_d) run_all<scalar_t, true, true, true>(x, g);
    if (need_v && !need_d) run_all<scalar_t, true, true, false>(x, g);
    if (!need_v && need_d) run_all<scalar_t, true, false, true>(x, g);
  });
  return std::make_tuple(g_values, g_d);
}

}  // namespace

// The schemas are defined in dandelion/warp/cpp_sample.py (with their fake kernels); this library adds the CPU ones.
TORCH_LIBRARY_IMPL(dandelion, CPU, m) {
  m.impl("warp_sample_cpu", &forward);
  m.impl("warp_sample_cpu_backward", &backward);
}
