// The warp index on the CPU: the exponential map of a node's displacement, its padded (row, column) and their
// Jacobian (dandelion/warp/index.py, formula by formula), for dandelion/warp/csrc/warp_cpu.cpp.
//
// float32 uses polynomial sin, cos and atan2 (Cephes sinf/cosf/atanf, about 1-2 ulp) that vectorise: no calls,
// no branches (the caller redoes |d| >= 8192 rad with the C library); float64 uses the C library throughout.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(_MSC_VER)
#define WARP_INLINE __forceinline
#else
#define WARP_INLINE inline __attribute__((always_inline))  // the index loop vectorises only if all is inlined
#endif

namespace dandelion_warp {

// ------------------------------------------------------------------ math
// float32: polynomials that vectorise (no calls, no branches); float64 and the rare large |d|: the C library.
struct FastMath {
  static WARP_INLINE float neg_bit(float x) {  // 1 where the sign bit is set (-0 included), else 0
    uint32_t u;
    std::memcpy(&u, &x, sizeof(u));
    return static_cast<float>(u >> 31);
  }
  // sin and cos of 0 <= s < 8192 (Cephes sinf/cosf: three-part Cody-Waite reduction by pi/2)
  static WARP_INLINE void sincos(float s, float& sn, float& cs) {
    float q = std::floor(s * 0.636619772367581343f + 0.5f);
    int qi = static_cast<int>(q);
    float r = s - q * 1.5703125f;
    r = r - q * 4.837512969970703125e-4f;
    r = r - q * 7.54978995489188216e-8f;
    float z = r * r;
    float ps = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
    float pc = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
               0.5f * z + 1.0f;
    bool odd = (qi & 1) != 0;
    float s0 = odd ? pc : ps;
    float c0 = odd ? ps : pc;
    sn = (qi & 2) ? -s0 : s0;
    cs = ((qi + 1) & 2) ? -c0 : c0;
  }
  // atan2 with the C library's signs (atan2(+-0, -x) = +-pi); Cephes atanf on [0, tan(pi/8)] after folding
  static WARP_INLINE float atan2(float y, float x) {
    float ax = std::fabs(x), ay = std::fabs(y);
    bool swap = ay > ax;
    float num = swap ? ax : ay;
    float den = swap ? ay : ax;
    bool mid = num > 0.414213562373095049f * den;
    float n2 = mid ? num - den : num;
    float d2 = mid ? num + den : den;
    d2 = d2 == 0.0f ? 1.0f : d2;  // atan2(0, 0) = 0
    float t = n2 / d2;
    float z = t * t;
    float p = (((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z - 3.33329491539e-1f) * z * t + t;
    float a = mid ? p + 0.785398163397448310f : p;
    a = swap ? 1.57079632679489662f - a : a;
    a = neg_bit(x) != 0.0f ? 3.14159265358979324f - a : a;
    return std::copysign(a, y);
  }
};

struct LibMath {
  template <typename T>
  static WARP_INLINE void sincos(T s, T& sn, T& cs) {
    sn = std::sin(s);
    cs = std::cos(s);
  }
  template <typename T>
  static WARP_INLINE T atan2(T y, T x) {
    return std::atan2(y, x);
  }
};

// ------------------------------------------------------------------ the grid's tables
template <typename T>
struct Tables {
  const T* sin_colat;
  const T* cos_colat;
  const T* colat;
  const T* row_table;
  const T* row_inv_step;
  const int32_t* bin_row;
  T inv_step, col_per_rad, inv_bin_width;
  int64_t nlat, nlon, gn, gs, nbins, hp, wp;  // hp, wp: the eager path's padded image (dandelion/warp/padding.py)
  bool uniform;
};

// Row, column and (with JAC) the four derivatives of one node's warp: dandelion/warp/index.py, formula by formula.
template <typename T>
struct Index {
  T rows, cols, ra, rb, ca, cb;
};

template <typename T, class M, bool UNIFORM, bool JAC>
WARP_INLINE Index<T> warp_index(T a, T b, T st, T ct, T colat_i, T i1, T j, const Tables<T>& g) {
  constexpr T EPS = std::numeric_limits<T>::epsilon();
  constexpr T TOL2 = (8 * EPS) * (8 * EPS);
  const T top = static_cast<T>(g.nlat + 1);
  T s2 = a * a + b * b;
  T s = std::sqrt(s2 < EPS * EPS ? EPS * EPS : s2);  // NaN stays NaN, as torch.clamp_min keeps it
  T sn, cs;
  M::sincos(s, sn, cs);
  T sinc = sn / s;
  T sdn = sinc * b, ye = sinc * a;
  T yh = cs * st - sdn * ct;
  T z = cs * ct + sdn * st;
  T r2 = ye * ye + yh * yh;
  bool keep = r2 > TOL2;
  bool still = s2 == 0;  // exactly the node, FMA contraction or not
  T rho = keep ? std::sqrt(r2) : T(0);
  T dlon = M::atan2(ye, yh);
  dlon = (keep && !still) ? dlon : T(0);
  T dth = M::atan2(rho * ct - z * st, z * ct + rho * st);
  dth = still ? T(0) : dth;
  Index<T> out;
  out.cols = j + dlon * g.col_per_rad;
  T slope;
  if (UNIFORM) {
    T pre = i1 + dth * g.inv_step;
    T r = pre < 0 ? T(0) : pre;  // NaN stays NaN (the corners poison its weights)
    out.rows = r > top ? top : r;
    slope = (pre >= 0 && pre <= top) ? g.inv_step : T(0);
  } else {  // the colatitude; row_lookup maps it to a row (table gathers do not vectorise) and scales ra, rb
    out.rows = colat_i + dth;
    slope = T(1);
  }
  if (!JAC) return out;
  // K = (cos s - S)/s^2 (its Taylor series below s = 1/2); dandelion/warp/index.py index_jacobian
  bool moving = s2 >= EPS * EPS;
  T s2s = s2 < T(0.25) ? s2 : T(0.25);
  T series = s2s * T(1.0 / 518918400.0) - T(1.0 / 3991680.0);
  series = series * s2s + T(1.0 / 45360.0);
  series = series * s2s - T(1.0 / 840.0);
  series = series * s2s + T(1.0 / 30.0);
  series = series * s2s - T(1.0 / 3.0);
  T direct = (cs - sinc) / (s2 > T(0.25) ? s2 : T(0.25));
  T kk = moving ? (s2 >= T(0.25) ? direct : series) : T(0);
  T sm = moving ? sinc : T(0);
  T dc_a = -sm * a, dc_b = -sm * b;
  T dye_a = sinc + kk * a * a, dye_b = kk * a * b, dsn_b = sinc + kk * b * b;
  T dyh_a = dc_a * st - dye_b * ct, dyh_b = dc_b * st - dsn_b * ct;
  T dz_a = dc_a * ct + dye_b * st, dz_b = dc_b * ct + dsn_b * st;
  T r2c = r2 > TOL2 ? r2 : TOL2;
  T inv_r = keep ? T(1) / std::sqrt(r2c) : T(0);
  T col_scale = (keep ? T(1) / r2c : T(0)) * g.col_per_rad;
  T row_scale = slope / (z * z + rho * rho);
  out.ra = ((ye * dye_a + yh * dyh_a) * inv_r * z - dz_a * rho) * row_scale;
  out.rb = ((ye * dye_b + yh * dyh_b) * inv_r * z - dz_b * rho) * row_scale;
  out.ca = (dye_a * yh - dyh_a * ye) * col_scale;
  out.cb = (dye_b * yh - dyh_b * ye) * col_scale;
  return out;
}

// The fractional padded row of colatitude theta through the row table (dandelion/warp/sampler.py
// row_index_and_slope: uniform bins locate the row within one, then one comparison each way) and its slope.
template <typename T>
WARP_INLINE T row_lookup(T theta, const Tables<T>& g, T& slope) {
  const T t0 = g.row_table[0], t1 = g.row_table[g.nlat + 1];
  T t = theta > t0 ? theta : t0;  // NaN -> t0
  t = t < t1 ? t : t1;
  int kb = static_cast<int>((t - t0) * g.inv_bin_width);
  kb = kb < 0 ? 0 : (kb > g.nbins - 1 ? static_cast<int>(g.nbins - 1) : kb);
  int k = g.bin_row[kb];
  k = k - (t < g.row_table[k] ? 1 : 0) + (t >= g.row_table[k + 1] ? 1 : 0);
  k = k < 0 ? 0 : (k > g.nlat ? static_cast<int>(g.nlat) : k);
  const T step_inv = g.row_inv_step[k];
  slope = (theta >= t0 && theta <= t1) ? step_inv : T(0);
  return static_cast<T>(k) + (t - g.row_table[k]) * step_inv + (theta - theta);  // + 0, or NaN for NaN
}

}  // namespace dandelion_warp
