//! Every hot numeric routine of the models and the optimizer, behind one seam.
//!
//! The determinism contract (docs/determinism.md) rules this module: only `+ - * /` and `sqrt`,
//! never a fused multiply-add, never `wide`'s `reduce_add` (its lane order differs between AVX
//! and non-AVX builds), and every sum in an order written here.
//!
//! **Layout.** The public functions below are the seam: each asks [`Kernels::active`] for the
//! implementation chosen at start-up and calls it, so a wider or batched implementation is added
//! in one place ([`Kernels`]) without touching a caller. The eight-lane algorithms are written
//! once ([`simd`], generic over a lane type), and each SIMD path instantiates them:
//!
//! | module | path | lanes |
//! |---|---|---|
//! | `portable` | [`SimdPath::Portable`] | `wide::f32x8`, whatever the build targets |
//! | `avx2` | [`SimdPath::Avx2`] | one `__m256`, `#[target_feature(enable = "avx2")]`, no FMA |
//! | `avx512` | [`SimdPath::Avx512`] | one `__m512` (two eight-lane accumulators in the sums), `#[target_feature(enable = "avx512f")]`, no FMA |
//! | [`scalar`] | (tests only) | plain loops that spell out each order: the twins |
//!
//! The path is chosen once per process by CPU detection, or forced with `LMZIP_SIMD`
//! ([`dispatch`]). All paths keep the same [`LANES`] logical lanes and the same order of
//! operations, so they compute the same bits; tests compare every path this CPU has with the
//! scalar twins, bit for bit, on lengths that are not multiples of the lane width.
//!
//! **The operations that define a summation order** (everything else is element-wise, one
//! rounding per operation, and has no order to keep):
//!
//! | operation | order |
//! |---|---|
//! | [`dot`] | four [`LANES`]-lane accumulators over blocks of 32 (`acc_q += a·b`), combined lane-wise `(acc0 + acc1) + (acc2 + acc3)`; each remaining block of 8 added into that; lanes folded `((0+1)+(2+3))+((4+5)+(6+7))` ([`fold_lanes`]); then the last `len % 8` products added one by one in index order |
//! | [`gemv`] | one [`dot`] per row (two rows computed in lockstep, each with its own accumulators) |
//! | [`dot_in_order`] | products added one by one in index order (short sums whose order predates the lanes) |
//! | [`gemv_t_acc`], [`gemv_t`] | `out += g[r]·W[r]` for the rows in ascending order, rows with `g[r] == 0` skipped (not added as `0·w`) |
//! | [`add_outer`] | `dst[r] += left[r]·right` per row, rows with `left[r] == 0` skipped |
//! | [`linear_backward_acc`], [`linear_backward`] | exactly [`add_outer`] into `g_w` plus [`gemv_t_acc`] into `g_x` (rows with `g[r] == 0` skipped) |
//! | [`axpy`] | `y[i] += a·x[i]`: one product and one add per element |
//! | [`scan_forward`] | per channel, `y_pre` = [`dot`] of the new state row with `C`, plus `D·u` |
//! | [`scan_backward`] | per channel, `dL/d(u·Δ)` and `dL/dΔ` as [`dot_in_order`] over the state index; `g_b`, `g_c` (and `g_d`, `g_a_log`) receive the channels' terms in ascending channel order |
//! | [`steps::linear_backward_steps`], [`steps::gemv_steps`] | a segment's steps at once, each output element receiving exactly the products and order of the per-step kernels called step after step ([`steps`]) |
//! | [`wkv_forward`], [`wkv_backward`] | per state row, `sa`, `y` (and in backward `dL/dv`, `dL/dsa`) as [`dot`]s; each gradient element of `w`, `b`, `k`, `r`, `kk` receives its rows' terms in ascending row order (two rows in lockstep, the first row's term added first) |
//!
//! The models' own sums outside this module (the norms) are written as in-order loops or call
//! the functions above.

// Bottom up: `math` (scalar functions) ← `lanes` (the lane trait, lane exp) ← `simd` (the
// algorithms) ← `scan`, `wkv`; `rows` ← `simd`, `par` ← `steps`; the paths instantiate
// `simd`, `scan` and `wkv` through their macros, which must be declared first.
#[macro_use]
mod simd;
#[macro_use]
mod scan;
#[macro_use]
mod wkv;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod dispatch;
pub mod exp64;
mod lanes;
pub mod math;
pub mod mixing;
mod par;
mod portable;
mod rows;
pub mod scalar;
pub mod steps;

pub use dispatch::{SIMD_ENV_VAR, SimdChoiceError, SimdPath};
pub use scan::{ScanGrads, ScanInput, ScanTrace};
pub use wkv::{WkvGrads, WkvInput, WkvOut, WkvTrace};

/// The logical lanes of every SIMD path: the width that fixes the summation order of [`dot`].
/// A wider machine keeps these eight logical lanes (more of them per instruction, or more rows
/// at once), never a different fold.
pub const LANES: usize = 8;

/// Folds eight lane accumulators in the fixed order `((0+1)+(2+3))+((4+5)+(6+7))`.
#[inline(always)]
pub(crate) fn fold_lanes(acc: [f32; LANES]) -> f32 {
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// One Adam step's constants for [`adam_update`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamCoefs {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    /// `1 / (1 − β1^t)` and `1 / (1 − β2^t)`: the bias corrections.
    pub inv_bc1: f32,
    pub inv_bc2: f32,
    pub eps: f32,
    /// Gradient elements below this in magnitude are read as zero.
    pub tiny_grad: f32,
    /// Moments below this in magnitude are stored as zero.
    pub tiny_moment: f32,
}

/// The one place where a kernel call meets an implementation: a handle on one SIMD path whose
/// methods dispatch to that path's entry points. The public functions of this module use
/// [`Kernels::active`]; tests take every path this CPU has from [`Kernels::for_path`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernels {
    /// Always a path this CPU can run (checked by every constructor).
    path: SimdPath,
}

/// Calls the entry point `$f` of the handle's path.
macro_rules! on_path {
    ($k:expr, $f:ident($($arg:expr),*)) => {
        match $k.path {
            SimdPath::Portable => portable::$f($($arg),*),
            // SAFETY: a handle holds the AVX2 path only when this CPU has AVX2.
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx2 => unsafe { avx2::$f($($arg),*) },
            // SAFETY: a handle holds the AVX-512 path only when this CPU has AVX-512F.
            #[cfg(target_arch = "x86_64")]
            SimdPath::Avx512 => unsafe { avx512::$f($($arg),*) },
            #[cfg(not(target_arch = "x86_64"))]
            SimdPath::Avx2 | SimdPath::Avx512 => {
                unreachable!("AVX2 and AVX-512 are never available off x86-64")
            }
        }
    };
}

impl Kernels {
    /// The path in force in this process ([`dispatch::active`]).
    #[inline(always)]
    pub fn active() -> Kernels {
        Kernels {
            path: dispatch::active(),
        }
    }

    /// The given path, if this CPU can run it.
    pub fn for_path(path: SimdPath) -> Option<Kernels> {
        path.is_available().then_some(Kernels { path })
    }

    /// Every path this CPU can run, narrowest first.
    pub fn all_available() -> Vec<Kernels> {
        SimdPath::available()
            .into_iter()
            .map(|path| Kernels { path })
            .collect()
    }

    pub fn path(self) -> SimdPath {
        self.path
    }

    #[inline]
    pub fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        on_path!(self, dot(a, b))
    }

    #[inline]
    pub fn gemv(self, w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
        on_path!(self, gemv(w, x, y, rows, cols))
    }

    #[inline]
    pub fn gemv_t_acc(self, w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
        on_path!(self, gemv_t_acc(w, g, out, rows, cols))
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn linear_backward_acc(
        self,
        w: &[f32],
        g: &[f32],
        x: &[f32],
        g_x: &mut [f32],
        g_w: Option<&mut [f32]>,
        rows: usize,
        cols: usize,
    ) {
        match g_w {
            Some(g_w) => on_path!(self, linear_backward_acc(w, g, x, g_x, g_w, rows, cols)),
            None => self.gemv_t_acc(w, g, g_x, rows, cols),
        }
    }

    #[inline]
    pub fn axpy(self, y: &mut [f32], a: f32, x: &[f32]) {
        on_path!(self, axpy(y, a, x))
    }

    #[inline]
    pub fn add_outer(self, dst: &mut [f32], rows: usize, cols: usize, left: &[f32], right: &[f32]) {
        on_path!(self, add_outer(dst, rows, cols, left, right))
    }

    #[inline]
    pub fn add_assign(self, y: &mut [f32], x: &[f32]) {
        on_path!(self, add_assign(y, x))
    }

    #[inline]
    pub fn exp_into(self, x: &[f32], out: &mut [f32]) {
        on_path!(self, exp_into(x, out))
    }

    #[inline]
    pub fn exp_scaled_into(self, a: f32, x: &[f32], out: &mut [f32]) {
        on_path!(self, exp_scaled_into(a, x, out))
    }

    #[inline]
    pub fn sigmoid_into(self, x: &[f32], out: &mut [f32]) {
        on_path!(self, sigmoid_into(x, out))
    }

    #[inline]
    pub fn silu_into(self, x: &[f32], out: &mut [f32], sig: &mut [f32]) {
        on_path!(self, silu_into(x, out, sig))
    }

    /// See [`steps::gemv_steps`] (`cols > 0`).
    #[inline]
    pub fn gemv_steps(self, w: &[f32], x: &[&[f32]], y: (&mut [f32], usize), dims: (usize, usize)) {
        on_path!(self, gemv_steps(w, x, y, dims))
    }

    /// See [`steps::linear_backward_steps`]; `g_x` is not zeroed here.
    #[inline]
    pub fn linear_backward_steps(
        self,
        w: &[f32],
        x: &[&[f32]],
        g: rows::Rows,
        g_x: (&mut [f32], usize),
        g_w: Option<&mut [f32]>,
        dims: (usize, usize),
    ) {
        on_path!(self, linear_backward_steps(w, x, g, g_x, g_w, dims))
    }

    /// The weight-gradient half of [`Kernels::linear_backward_steps`] for the rows `g_w`
    /// holds, `g` starting at the first's coefficient.
    #[inline]
    pub fn weight_grad_steps(self, x: &[&[f32]], g: rows::Rows, g_w: &mut [f32], cols: usize) {
        on_path!(self, weight_grad_steps(x, g, g_w, cols))
    }

    /// The input-gradient half of [`Kernels::linear_backward_steps`] for `n` steps.
    #[inline]
    pub fn input_grad_steps(
        self,
        w: &[f32],
        g: rows::Rows,
        g_x: (&mut [f32], usize),
        n: usize,
        dims: (usize, usize),
    ) {
        on_path!(self, input_grad_steps(w, g, g_x, n, dims))
    }

    #[inline]
    pub fn scan_forward(self, x: &ScanInput, ssm: &mut [f32], da: &mut [f32], y_pre: &mut [f32]) {
        on_path!(self, scan_forward(x, ssm, da, y_pre))
    }

    #[inline]
    pub fn scan_backward(
        self,
        tr: &ScanTrace,
        g_y_pre: &[f32],
        g: ScanGrads,
        carry: Option<&mut [f32]>,
    ) {
        on_path!(self, scan_backward(tr, g_y_pre, g, carry))
    }

    #[inline]
    pub fn wkv_forward(self, x: &WkvInput, state: &mut [f32], out: WkvOut) {
        on_path!(self, wkv_forward(x, state, out))
    }

    #[inline]
    pub fn wkv_backward(
        self,
        x: &WkvInput,
        tr: WkvTrace,
        g: WkvGrads,
        carry: Option<&mut [f32]>,
        g_rows: &mut [f32],
    ) {
        on_path!(self, wkv_backward(x, tr, g, carry, g_rows))
    }

    #[inline]
    pub fn sgd_update(self, p: &mut [f32], g: &mut [f32], lr: f32, tiny_grad: f32) {
        on_path!(self, sgd_update(p, g, lr, tiny_grad))
    }

    #[inline]
    pub fn adam_update(
        self,
        c: &AdamCoefs,
        p: &mut [f32],
        g: &mut [f32],
        m: &mut [f32],
        v: &mut [f32],
    ) {
        on_path!(self, adam_update(c, p, g, m, v))
    }
}

/// `sum_i a[i] * b[i]` in the module's fixed order (table above).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    Kernels::active().dot(a, b)
}

/// `sum_i a[i] * b[i]` added strictly in index order, one product at a time: for the short sums
/// whose order predates the eight-lane one (the scan's, over one channel's state). Scalar on
/// every path.
#[inline]
pub fn dot_in_order(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        sum += x * y;
    }
    sum
}

/// Matrix-vector product `y = W x` for a row-major `W` of `rows × cols`.
#[inline]
pub fn gemv(w: &[f32], x: &[f32], y: &mut [f32], rows: usize, cols: usize) {
    par::gemv(Kernels::active(), w, x, y, rows, cols)
}

/// Transposed product `out = Wᵀ g` for a row-major `W` of `rows × cols` (`out` has `cols`
/// entries). Rows are added in ascending order, element by element, so lanes never mix.
#[inline]
pub fn gemv_t(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    out[..cols].fill(0.0);
    gemv_t_acc(w, g, out, rows, cols);
}

/// `out += Wᵀ g`, the accumulating form of [`gemv_t`]: `out += g[r] · W[r]` for each row in
/// ascending order, skipping rows whose `g[r]` is zero.
///
/// The skip matters for the bits: `x + 0·w` is not `x` when `x` is −0 or `w` is infinite. The
/// rows that remain are added four per pass over `out`, each element receiving the same sums in
/// the same order as one [`axpy`] per row, with a quarter of the loads and stores of `out`.
#[inline]
pub fn gemv_t_acc(w: &[f32], g: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    Kernels::active().gemv_t_acc(w, g, out, rows, cols)
}

/// Backward of `y = W x` for a row-major `W` of `rows × cols`, given `g = dL/dy`: writes
/// `g_x = Wᵀ g` and, when `g_w` is given, adds `g xᵀ` to it. See [`linear_backward_acc`].
#[inline]
pub fn linear_backward(
    w: &[f32],
    g: &[f32],
    x: &[f32],
    g_x: &mut [f32],
    g_w: Option<&mut [f32]>,
    rows: usize,
    cols: usize,
) {
    g_x[..cols].fill(0.0);
    linear_backward_acc(w, g, x, g_x, g_w, rows, cols);
}

/// Backward of `y = W x` for a row-major `W` of `rows × cols`, given `g = dL/dy`: `g_x += Wᵀ g`
/// and, when `g_w` is given, `g_w += g xᵀ`.
///
/// The same bits as [`add_outer`]`(g_w, rows, cols, g, x)` and [`gemv_t_acc`]`(w, g, g_x, rows,
/// cols)` (which write different buffers, so their order is free): both skip the rows whose
/// `g[r]` is zero, and every element gets the same products added in the same order. Done in
/// one pass, four rows at a time, each block of `x` and of `g_x` is loaded once for the rows of
/// both products.
#[inline]
pub fn linear_backward_acc(
    w: &[f32],
    g: &[f32],
    x: &[f32],
    g_x: &mut [f32],
    g_w: Option<&mut [f32]>,
    rows: usize,
    cols: usize,
) {
    Kernels::active().linear_backward_acc(w, g, x, g_x, g_w, rows, cols)
}

/// `y += a * x`, element-wise.
#[inline]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    Kernels::active().axpy(y, a, x)
}

/// `dst[r][c] += left[r] * right[c]`: the gradient of a matrix in `y = W x`. Rows whose
/// `left[r]` is zero are left untouched.
#[inline]
pub fn add_outer(dst: &mut [f32], rows: usize, cols: usize, left: &[f32], right: &[f32]) {
    Kernels::active().add_outer(dst, rows, cols, left, right)
}

/// `y += x`, element-wise.
#[inline]
pub fn add_assign(y: &mut [f32], x: &[f32]) {
    Kernels::active().add_assign(y, x)
}

/// Writes `exp(x[i])` into `out[i]`, bit for bit [`math::exp`].
#[inline]
pub fn exp_into(x: &[f32], out: &mut [f32]) {
    Kernels::active().exp_into(x, out)
}

/// Writes `exp(a · x[i])` into `out[i]`: the product rounded, then [`math::exp`].
#[inline]
pub fn exp_scaled_into(a: f32, x: &[f32], out: &mut [f32]) {
    Kernels::active().exp_scaled_into(a, x, out)
}

/// Writes `sigmoid(x[i])` into `out[i]`, bit for bit [`math::sigmoid`].
#[inline]
pub fn sigmoid_into(x: &[f32], out: &mut [f32]) {
    Kernels::active().sigmoid_into(x, out)
}

/// Writes `silu(x[i])` into `out[i]` and `sigmoid(x[i])` into `sig[i]`, bit for bit
/// [`math::silu_with_sigmoid`].
#[inline]
pub fn silu_into(x: &[f32], out: &mut [f32], sig: &mut [f32]) {
    Kernels::active().silu_into(x, out, sig)
}

/// One byte of a Mamba-1 layer's selective scan: advances the `[I, S]` state `ssm` in place,
/// writing `dA = exp(Δ·A)` (`[I, S]`) and `y_pre` (`[I]`). Per channel, `dA_j` is
/// [`math::exp`] of the rounded product `Δ·A_j`, `s'_j = s_j·dA_j + (u·Δ)·B_j`, and `y_pre` is
/// [`dot`]`(s', C) + D·u`; lanes run over the state index (`scan` module).
#[inline]
pub fn scan_forward(x: &ScanInput, ssm: &mut [f32], da: &mut [f32], y_pre: &mut [f32]) {
    par::scan_forward(Kernels::active(), x, ssm, da, y_pre)
}

/// Backward of [`scan_forward`] from `g_y_pre = dL/dy_pre`: writes `g.u`, `g.dt` (before
/// softplus'), adds `g.b`, `g.c` (channels in ascending order) and, when given, `g.d`,
/// `g.a_log`. With `carry` (the gradient of the state after the step) adds it in and leaves
/// there the gradient of the state before it. The two sums over the state index are added one
/// term at a time in index order ([`dot_in_order`]); twin: [`scalar::scan_backward`].
#[inline]
pub fn scan_backward(tr: &ScanTrace, g_y_pre: &[f32], g: ScanGrads, carry: Option<&mut [f32]>) {
    Kernels::active().scan_backward(tr, g_y_pre, g, carry)
}

/// One step of RWKV-7's WKV state for every head (heads of width `x.n`, the state `[H, n, n]`
/// in place): per row `i`, `sa_i = S_i·kk`, `S'_i = S_i ⊙ w − sa_i·b + v_i·k` (each cell
/// `((s·w) − (sa·b)) + (v·k)`), `y_i = S'_i·r`, the sums [`dot`]s; writes `out.sa`, `out.y`
/// and, when given, the state before the step into `out.prev`. Twin: [`scalar::wkv_forward`].
#[inline]
pub fn wkv_forward(x: &WkvInput, state: &mut [f32], out: WkvOut) {
    Kernels::active().wkv_forward(x, state, out)
}

/// Backward of [`wkv_forward`] from `tr.g_y = dL/dy`: writes `g.w`, `g.b`, `g.kk` and adds to
/// `g.k`, `g.v`, `g.r`, each gradient element receiving its rows' terms in ascending row
/// order; with `carry` (`[H, n, n]`) reads dL/dS' there and leaves dL/dS. The state after the
/// step is recomputed from `tr.prev` with the forward's cell. `g_rows` is scratch of `2n`.
/// Twin: [`scalar::wkv_backward`] (module `wkv` says why two rows in lockstep keep the bits).
#[inline]
pub fn wkv_backward(
    x: &WkvInput,
    tr: WkvTrace,
    g: WkvGrads,
    carry: Option<&mut [f32]>,
    g_rows: &mut [f32],
) {
    Kernels::active().wkv_backward(x, tr, g, carry, g_rows)
}

/// SGD's update: `p += lr · g`, with `g` read as zero where `|g| < tiny_grad` (compare-and-
/// select: NaN stays NaN), consuming (zeroing) `g` in the same pass.
#[inline]
pub fn sgd_update(p: &mut [f32], g: &mut [f32], lr: f32, tiny_grad: f32) {
    Kernels::active().sgd_update(p, g, lr, tiny_grad)
}

/// Adam's update, element by element: `g ← flush(g, tiny_grad)`, `m ← flush(β1 m + (1−β1) g,
/// tiny_moment)`, `v ← flush(β2 v + (1−β2) g², tiny_moment)`, `p ← p + lr · (m · bc1) /
/// (√(v · bc2) + ε)`, consuming (zeroing) `g`. `flush(x, t)` is `+0` where `|x| < t`.
///
/// An empty `m` means β1 = 0, where the first moment is the flushed gradient itself
/// (`0 · m + 1 · g` is exactly `g`, a flushed gradient never being −0; an `m` that is not
/// finite came from a gradient that made its parameter NaN already, which no later step
/// changes), so it is neither read nor kept: the same bits without a third of the optimizer's memory.
#[inline]
pub fn adam_update(c: &AdamCoefs, p: &mut [f32], g: &mut [f32], m: &mut [f32], v: &mut [f32]) {
    Kernels::active().adam_update(c, p, g, m, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 4.0 - 2.0
            })
            .collect()
    }

    /// The bits of each value, every NaN counted as one: Rust (like LLVM) leaves the sign and
    /// payload of a NaN result unspecified, so the compiler may commute an operation and pick the
    /// other operand's NaN; only that a value is NaN is defined.
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter()
            .map(|x| {
                if x.is_nan() {
                    f32::NAN.to_bits()
                } else {
                    x.to_bits()
                }
            })
            .collect()
    }

    /// Every path this CPU has; on an x86-64 CPU with AVX2 (AVX-512F) that includes the AVX2
    /// (AVX-512) path, so the tests below compare it too.
    fn paths() -> Vec<Kernels> {
        let all = Kernels::all_available();
        #[cfg(target_arch = "x86_64")]
        for (feature, path) in [
            (std::arch::is_x86_feature_detected!("avx2"), SimdPath::Avx2),
            (
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx2"),
                SimdPath::Avx512,
            ),
        ] {
            assert_eq!(all.iter().any(|k| k.path() == path), feature);
        }
        all
    }

    // Lengths around and between multiples of the lane width.
    const LENS: [usize; 12] = [0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 67, 130];

    #[test]
    fn dot_matches_scalar_twin() {
        for k in paths() {
            for n in LENS {
                let (a, b) = (data(n, 1), data(n, 2));
                assert_eq!(
                    k.dot(&a, &b).to_bits(),
                    scalar::dot(&a, &b).to_bits(),
                    "{k:?} n={n}"
                );
            }
        }
    }

    #[test]
    fn gemv_and_transpose_match_scalar_twins() {
        let shapes = [
            (1, 1),
            (3, 7),
            (5, 8),
            (9, 17),
            (16, 33),
            (4, 0),
            (0, 5),
            (7, 72),
            (11, 21),
        ];
        for k in paths() {
            for (rows, cols) in shapes {
                let w = data(rows * cols, 3);
                let x = data(cols, 4);
                let g = data(rows, 5);
                let (mut y1, mut y2) = (vec![0.0; rows], vec![0.0; rows]);
                k.gemv(&w, &x, &mut y1, rows, cols);
                scalar::gemv(&w, &x, &mut y2, rows, cols);
                assert_eq!(bits(&y1), bits(&y2), "{k:?} gemv {rows}x{cols}");
                let (mut t1, mut t2) = (data(cols, 6), data(cols, 6));
                k.gemv_t_acc(&w, &g, &mut t1, rows, cols);
                scalar::gemv_t_acc(&w, &g, &mut t2, rows, cols);
                assert_eq!(bits(&t1), bits(&t2), "{k:?} gemv_t_acc {rows}x{cols}");
            }
        }
    }

    /// Rows with a zero coefficient must be skipped, not added as `0·w`: that would turn an
    /// output of −0 into +0, and an infinite weight into NaN. Shapes cover every count of rows
    /// left over after the passes of four, and widths that are not multiples of eight.
    #[test]
    fn transpose_and_outer_skip_zero_rows_like_their_twins() {
        for k in paths() {
            for (rows, cols) in [(1, 3), (4, 8), (6, 9), (7, 16), (11, 21), (13, 40)] {
                let mut w = data(rows * cols, 13);
                let mut g = data(rows, 14);
                for r in (0..rows).step_by(3) {
                    g[r] = if r % 2 == 0 { 0.0 } else { -0.0 };
                    w[r * cols] = f32::INFINITY;
                }
                let mut out0 = data(cols, 15);
                out0[0] = -0.0;
                let (mut t1, mut t2) = (out0.clone(), out0.clone());
                k.gemv_t_acc(&w, &g, &mut t1, rows, cols);
                scalar::gemv_t_acc(&w, &g, &mut t2, rows, cols);
                assert_eq!(bits(&t1), bits(&t2), "{k:?} gemv_t_acc {rows}x{cols}");
                let right: Vec<f32> = data(cols, 16).iter().map(|v| v * 1e30).collect();
                let (mut d1, mut d2) = (w.clone(), w.clone());
                d1[cols - 1] = -0.0;
                d2[cols - 1] = -0.0;
                k.add_outer(&mut d1, rows, cols, &g, &right);
                scalar::add_outer(&mut d2, rows, cols, &g, &right);
                assert_eq!(bits(&d1), bits(&d2), "{k:?} add_outer {rows}x{cols}");
            }
        }
    }

    /// The fused backward of a linear layer equals `add_outer` plus `gemv_t_acc`, zero rows,
    /// −0, infinities and NaN included.
    #[test]
    fn linear_backward_matches_its_twin() {
        for k in paths() {
            for (rows, cols) in [(1, 3), (4, 8), (6, 9), (7, 16), (11, 21), (13, 40), (9, 0)] {
                let mut w = data(rows * cols, 18);
                let mut g = data(rows, 19);
                for r in (0..rows).step_by(3) {
                    g[r] = if r % 2 == 0 { 0.0 } else { -0.0 };
                    if cols > 0 {
                        w[r * cols] = f32::INFINITY;
                    }
                }
                let mut x = data(cols, 20);
                let mut gx0 = data(cols, 21);
                let mut gw0 = data(rows * cols, 22);
                if cols > 0 {
                    gx0[0] = -0.0;
                    gw0[cols - 1] = -0.0;
                    x[cols / 2] = f32::NAN;
                }
                let (mut gx1, mut gw1) = (gx0.clone(), gw0.clone());
                k.linear_backward_acc(&w, &g, &x, &mut gx1, Some(&mut gw1), rows, cols);
                let (mut gx2, mut gw2) = (gx0.clone(), gw0.clone());
                scalar::linear_backward_acc(&w, &g, &x, &mut gx2, Some(&mut gw2), rows, cols);
                assert_eq!(bits(&gx1), bits(&gx2), "{k:?} g_x {rows}x{cols}");
                assert_eq!(bits(&gw1), bits(&gw2), "{k:?} g_w {rows}x{cols}");
                let mut gx3 = gx0.clone();
                k.linear_backward_acc(&w, &g, &x, &mut gx3, None, rows, cols);
                assert_eq!(bits(&gx3), bits(&gx2), "{k:?} g_x alone {rows}x{cols}");
            }
        }
    }

    #[test]
    fn axpy_outer_and_add_match_scalar_twins() {
        for k in paths() {
            for n in LENS {
                let x = data(n, 7);
                let (mut y1, mut y2) = (data(n, 8), data(n, 8));
                k.axpy(&mut y1, 0.37, &x);
                scalar::axpy(&mut y2, 0.37, &x);
                assert_eq!(bits(&y1), bits(&y2), "{k:?} axpy n={n}");
                k.add_assign(&mut y1, &x);
                scalar::add_assign(&mut y2, &x);
                assert_eq!(bits(&y1), bits(&y2), "{k:?} add_assign n={n}");
            }
            let (rows, cols) = (5, 19);
            let (l, r) = (data(rows, 9), data(cols, 10));
            let (mut d1, mut d2) = (data(rows * cols, 11), data(rows * cols, 11));
            k.add_outer(&mut d1, rows, cols, &l, &r);
            scalar::add_outer(&mut d2, rows, cols, &l, &r);
            assert_eq!(bits(&d1), bits(&d2), "{k:?}");
        }
    }

    /// Inputs for the activations: ordinary values over the exponential's range, and the
    /// edges (clamps, ±0, ±inf, NaN) spread over lanes and tails.
    fn activation_inputs(n: usize, seed: u32, scale: f32) -> Vec<f32> {
        let edges = [
            -1000.0,
            -87.5,
            -0.0,
            0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1000.0,
            1e-30,
            88.5,
        ];
        let mut x: Vec<f32> = data(n, seed).iter().map(|v| v * scale).collect();
        for (i, xi) in x.iter_mut().enumerate().step_by(3) {
            *xi = edges[(i / 3) % edges.len()];
        }
        x
    }

    #[test]
    fn activations_match_scalar_twins() {
        for k in paths() {
            for n in LENS {
                let x = activation_inputs(n, 12, 50.0);
                let zeros = || vec![0.0; n];
                let (mut a, mut b) = (zeros(), zeros());
                k.exp_into(&x, &mut a);
                scalar::exp_into(&x, &mut b);
                assert_eq!(bits(&a), bits(&b), "{k:?} exp n={n}");
                let x = activation_inputs(n, 17, 12.0);
                k.exp_scaled_into(-0.37, &x, &mut a);
                scalar::exp_scaled_into(-0.37, &x, &mut b);
                assert_eq!(bits(&a), bits(&b), "{k:?} exp_scaled n={n}");
                k.sigmoid_into(&x, &mut a);
                scalar::sigmoid_into(&x, &mut b);
                assert_eq!(bits(&a), bits(&b), "{k:?} sigmoid n={n}");
                let (mut sa, mut sb) = (zeros(), zeros());
                k.silu_into(&x, &mut a, &mut sa);
                scalar::silu_into(&x, &mut b, &mut sb);
                assert_eq!(bits(&a), bits(&b), "{k:?} silu n={n}");
                assert_eq!(bits(&sa), bits(&sb), "{k:?} silu's sigmoid n={n}");
            }
        }
    }

    /// The scalar twins of the activations are the scalar functions of [`math`].
    #[test]
    fn activation_twins_are_the_math_functions() {
        let x = activation_inputs(37, 5, 20.0);
        let mut out = vec![0.0; x.len()];
        scalar::exp_scaled_into(-0.37, &x, &mut out);
        for (o, &xi) in out.iter().zip(&x) {
            assert_eq!(o.to_bits(), math::exp(-0.37 * xi).to_bits());
        }
        let (mut u, mut s) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        scalar::silu_into(&x, &mut u, &mut s);
        for i in 0..x.len() {
            let (ui, si) = math::silu_with_sigmoid(x[i]);
            assert_eq!(
                (u[i].to_bits(), s[i].to_bits()),
                (ui.to_bits(), si.to_bits())
            );
        }
    }

    /// A segment's products on every path equal [`gemv`]'s twin per step: odd and even step
    /// counts (steps go two at a time), widths around the blocks of 8 and 32, NaN and infinities.
    #[test]
    fn gemv_steps_matches_its_twin() {
        let shapes = [
            (1, 1, 1),
            (3, 7, 2),
            (5, 8, 3),
            (4, 33, 16),
            (7, 72, 5),
            (2, 130, 4),
            (3, 19, 11),
        ];
        for k in paths() {
            for (rows, cols, n) in shapes {
                let w = scan_values(rows * cols, 70, 1.0);
                let xs: Vec<Vec<f32>> = (0..n)
                    .map(|t| scan_values(cols, 71 + t as u32, 2.0))
                    .collect();
                let x: Vec<&[f32]> = xs.iter().map(|v| v.as_slice()).collect();
                let stride = rows + 3;
                let (mut y1, mut y2) = (data(n * stride, 72), data(n * stride, 72));
                k.gemv_steps(&w, &x, (&mut y1, stride), (rows, cols));
                scalar::gemv_steps(&w, &x, (&mut y2, stride), (rows, cols));
                assert_eq!(bits(&y1), bits(&y2), "{k:?} {rows}x{cols} n={n}");
            }
        }
    }

    /// A segment's linear backward on every path equals its twin: rows not a multiple of four,
    /// widths around the register blocks (8 and 64 columns; 16 to 128 on the 16-lane path, and
    /// 245 = 15 blocks of 16 and five more, every group size), zero coefficients that break the
    /// four-row passes (or none: every row and step without a zero), −0, infinities and NaN.
    #[test]
    fn linear_backward_steps_matches_its_twin() {
        let shapes = [
            (1, 1, 1),
            (5, 7, 3),
            (4, 8, 16),
            (9, 17, 5),
            (6, 64, 4),
            (7, 70, 16),
        ];
        let shapes = shapes
            .into_iter()
            .chain([(13, 130, 9), (3, 200, 2), (3, 245, 3), (4, 9, 0)]);
        for (k, sparse) in paths().into_iter().flat_map(|k| [(k, true), (k, false)]) {
            for (rows, cols, n) in shapes.clone() {
                let mut w = data(rows * cols, 60);
                w[0] = f32::INFINITY;
                let xs: Vec<Vec<f32>> = (0..n)
                    .map(|t| scan_values(cols, 61 + t as u32, 2.0))
                    .collect();
                let x: Vec<&[f32]> = xs.iter().map(|v| v.as_slice()).collect();
                let g_stride = rows + 2;
                let mut g = data(n * g_stride, 62);
                for (i, gi) in g.iter_mut().enumerate() {
                    if sparse && i % 5 == 0 {
                        *gi = if i % 2 == 0 { 0.0 } else { -0.0 };
                    } else if *gi == 0.0 {
                        *gi = 0.5;
                    }
                }
                let g_rows = rows::Rows {
                    data: &g,
                    stride: g_stride,
                };
                let gx_stride = cols + 1;
                let mut gx0 = data(n * gx_stride, 63);
                if let Some(v) = gx0.first_mut() {
                    *v = -0.0;
                }
                let gw0 = scan_values(rows * cols, 64, 1.0);
                for with_gw in [true, false] {
                    let (mut gx1, mut gw1) = (gx0.clone(), gw0.clone());
                    let gw = with_gw.then_some(&mut gw1[..]);
                    k.linear_backward_steps(
                        &w,
                        &x,
                        g_rows,
                        (&mut gx1, gx_stride),
                        gw,
                        (rows, cols),
                    );
                    let (mut gx2, mut gw2) = (gx0.clone(), gw0.clone());
                    let gw = with_gw.then_some(&mut gw2[..]);
                    let dims = (rows, cols);
                    scalar::linear_backward_steps(&w, &x, g_rows, (&mut gx2, gx_stride), gw, dims);
                    let shape = format!("{k:?} {rows}x{cols} n={n} g_w={with_gw} sparse={sparse}");
                    assert_eq!(bits(&gx1), bits(&gx2), "g_x {shape}");
                    assert_eq!(bits(&gw1), bits(&gw2), "g_w {shape}");
                }
            }
        }
    }

    /// Scan inputs for `channels × s`: ordinary values, and edges (±0, ±inf, NaN, huge steps
    /// that clamp the exponential) spread over lanes and tails.
    fn scan_values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
        let edges = [
            -0.0,
            0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e30,
            -1e-40,
        ];
        let mut v: Vec<f32> = data(n, seed).iter().map(|x| x * scale).collect();
        for (i, x) in v.iter_mut().enumerate().skip(5).step_by(11) {
            *x = edges[(i / 11) % edges.len()];
        }
        v
    }

    /// The shapes the scan tests run: state sizes around and between multiples of eight.
    const SCAN_SHAPES: [(usize, usize); 9] = [
        (1, 1),
        (3, 7),
        (5, 8),
        (4, 9),
        (6, 16),
        (3, 17),
        (2, 33),
        (1, 15),
        (0, 16),
    ];

    /// The scan's input for one shape: `A` negative like `−exp(A_log)`, steps positive.
    struct ScanCase {
        u: Vec<f32>,
        dt: Vec<f32>,
        b: Vec<f32>,
        c: Vec<f32>,
        d: Vec<f32>,
        a: Vec<f32>,
    }

    impl ScanCase {
        fn new(channels: usize, s: usize, seed: u32) -> Self {
            let a = data(channels * s, seed)
                .iter()
                .map(|x| -(x * x) - 0.5)
                .collect();
            let mut a: Vec<f32> = a;
            if a.len() > 3 {
                a[3] = f32::NEG_INFINITY;
            }
            let dt = data(channels, seed + 1)
                .iter()
                .map(|x| x.abs() * 3.0)
                .collect();
            ScanCase {
                u: scan_values(channels, seed + 2, 2.0),
                dt,
                b: scan_values(s, seed + 3, 1.0),
                c: scan_values(s, seed + 4, 1.0),
                d: data(channels, seed + 5),
                a,
            }
        }
        fn input(&self) -> ScanInput<'_> {
            ScanInput {
                u: &self.u,
                dt: &self.dt,
                b: &self.b,
                c: &self.c,
                d: &self.d,
                a: &self.a,
            }
        }
    }

    #[test]
    fn scan_forward_matches_its_twin() {
        for k in paths() {
            for (channels, s) in SCAN_SHAPES {
                let case = ScanCase::new(channels, s, 30);
                let ssm0 = scan_values(channels * s, 31, 5.0);
                let (mut ssm1, mut da1, mut y1) =
                    (ssm0.clone(), vec![0.0; channels * s], vec![0.0; channels]);
                k.scan_forward(&case.input(), &mut ssm1, &mut da1, &mut y1);
                let (mut ssm2, mut da2, mut y2) =
                    (ssm0.clone(), vec![0.0; channels * s], vec![0.0; channels]);
                scalar::scan_forward(&case.input(), &mut ssm2, &mut da2, &mut y2);
                assert_eq!(bits(&ssm1), bits(&ssm2), "{k:?} state {channels}x{s}");
                assert_eq!(bits(&da1), bits(&da2), "{k:?} dA {channels}x{s}");
                assert_eq!(bits(&y1), bits(&y2), "{k:?} y_pre {channels}x{s}");
            }
        }
    }

    /// The twin computes what the per-step kernels computed before the scan had its own:
    /// [`exp_scaled_into`] per row, the update, [`dot`] with `C`.
    #[test]
    fn scan_forward_twin_is_the_per_row_kernels() {
        let (channels, s) = (5, 17);
        let case = ScanCase::new(channels, s, 40);
        let ssm0 = scan_values(channels * s, 41, 5.0);
        let (mut ssm, mut da, mut y) = (ssm0.clone(), vec![0.0; channels * s], vec![0.0; 5]);
        scalar::scan_forward(&case.input(), &mut ssm, &mut da, &mut y);
        for c in 0..channels {
            let row = c * s..(c + 1) * s;
            let mut want_da = vec![0.0; s];
            scalar::exp_scaled_into(case.dt[c], &case.a[row.clone()], &mut want_da);
            let u_dt = case.u[c] * case.dt[c];
            let want_s: Vec<f32> = (0..s)
                .map(|j| ssm0[c * s + j] * want_da[j] + u_dt * case.b[j])
                .collect();
            let want_y = scalar::dot(&want_s, &case.c) + case.d[c] * case.u[c];
            assert_eq!(bits(&da[row.clone()]), bits(&want_da), "dA row {c}");
            assert_eq!(bits(&ssm[row]), bits(&want_s), "state row {c}");
            assert_eq!(bits(&[y[c]]), bits(&[want_y]), "y_pre {c}");
        }
    }

    #[test]
    fn scan_backward_matches_its_twin() {
        for k in paths() {
            for (channels, s) in SCAN_SHAPES {
                for (with_carry, with_params) in [(true, true), (true, false), (false, true)] {
                    let case = ScanCase::new(channels, s, 50);
                    let da = scan_values(channels * s, 51, 1.0);
                    let ssm_prev = scan_values(channels * s, 52, 3.0);
                    let ssm_new = scan_values(channels * s, 53, 3.0);
                    let g_y = scan_values(channels, 54, 1.0);
                    let trace = ScanTrace {
                        input: case.input(),
                        da: &da,
                        ssm_prev: &ssm_prev,
                        ssm_new: &ssm_new,
                    };
                    let run = |twin: bool| {
                        let (mut gu, mut gdt) = (vec![0.0; channels], vec![0.0; channels]);
                        let (mut gb, mut gc) = (scan_values(s, 55, 1.0), scan_values(s, 56, 1.0));
                        let mut gd = scan_values(channels, 57, 1.0);
                        let mut ga = scan_values(channels * s, 58, 1.0);
                        let mut carry = scan_values(channels * s, 59, 1.0);
                        let (mut s1, mut s2) = (vec![0.0; s], vec![0.0; s]);
                        let grads = ScanGrads {
                            u: &mut gu,
                            dt: &mut gdt,
                            b: &mut gb,
                            c: &mut gc,
                            d: with_params.then_some(&mut gd[..]),
                            a_log: with_params.then_some(&mut ga[..]),
                            s_scratch: &mut s1,
                            dt_a_scratch: &mut s2,
                        };
                        let cc = with_carry.then_some(&mut carry[..]);
                        if twin {
                            scalar::scan_backward(&trace, &g_y, grads, cc);
                        } else {
                            k.scan_backward(&trace, &g_y, grads, cc);
                        }
                        [gu, gdt, gb, gc, gd, ga, carry].map(|v| bits(&v))
                    };
                    let names = ["u", "dt", "b", "c", "d", "a_log", "carry"];
                    for ((got, want), name) in run(false).iter().zip(run(true)).zip(names) {
                        assert_eq!(
                            got, &want,
                            "{k:?} g_{name} {channels}x{s} carry={with_carry} params={with_params}"
                        );
                    }
                }
            }
        }
    }

    /// The shapes the WKV tests run, `(heads, n)`: head widths around and between multiples of
    /// the lane widths (8, 16), odd ones leaving a row without a partner.
    const WKV_SHAPES: [(usize, usize); 11] = [
        (1, 1),
        (2, 3),
        (1, 7),
        (2, 8),
        (1, 9),
        (2, 13),
        (1, 16),
        (3, 17),
        (1, 33),
        (2, 64),
        (0, 8),
    ];

    /// One WKV step's inputs for `heads` heads of width `n`, with the edge values of the scan's.
    fn wkv_inputs(heads: usize, n: usize, seed: u32) -> [Vec<f32>; 6] {
        std::array::from_fn(|q| scan_values(heads * n, seed + q as u32, 1.0))
    }

    fn wkv_input(v: &[Vec<f32>; 6], n: usize) -> WkvInput<'_> {
        WkvInput {
            n,
            w: &v[0],
            b: &v[1],
            k: &v[2],
            v: &v[3],
            r: &v[4],
            kk: &v[5],
        }
    }

    #[test]
    fn wkv_forward_matches_its_twin() {
        for k in paths() {
            for (heads, n) in WKV_SHAPES {
                for traced in [false, true] {
                    let inputs = wkv_inputs(heads, n, 60);
                    let x = wkv_input(&inputs, n);
                    let state0 = scan_values(heads * n * n, 61, 2.0);
                    let run = |twin: bool| {
                        let mut state = state0.clone();
                        let (mut sa, mut y) = (vec![0.0; heads * n], vec![0.0; heads * n]);
                        let mut prev = vec![7.0; heads * n * n];
                        let out = WkvOut {
                            sa: &mut sa,
                            y: &mut y,
                            prev: traced.then_some(&mut prev[..]),
                        };
                        if twin {
                            scalar::wkv_forward(&x, &mut state, out);
                        } else {
                            k.wkv_forward(&x, &mut state, out);
                        }
                        [state, sa, y, prev].map(|v| bits(&v))
                    };
                    let names = ["state", "sa", "y", "prev"];
                    for ((got, want), name) in run(false).iter().zip(run(true)).zip(names) {
                        assert_eq!(got, &want, "{k:?} {name} {heads}x{n} traced={traced}");
                    }
                }
            }
        }
    }

    #[test]
    fn wkv_backward_matches_its_twin() {
        for k in paths() {
            for (heads, n) in WKV_SHAPES {
                for with_carry in [false, true] {
                    let (c, cells) = (heads * n, heads * n * n);
                    let inputs = wkv_inputs(heads, n, 70);
                    let x = wkv_input(&inputs, n);
                    let prev = scan_values(cells, 71, 2.0);
                    let (sa, g_y) = (scan_values(c, 72, 3.0), scan_values(c, 73, 1.0));
                    let run = |twin: bool| {
                        let tr = WkvTrace {
                            prev: &prev,
                            sa: &sa,
                            g_y: &g_y,
                        };
                        let mut gs: [Vec<f32>; 6] =
                            std::array::from_fn(|q| scan_values(c, 74 + q as u32, 1.0));
                        let mut carry = scan_values(cells, 80, 1.0);
                        let mut scratch = vec![0.0; 2 * n];
                        let [gw, gb, gk, gv, gr, gkk] = &mut gs;
                        let g = WkvGrads {
                            w: gw,
                            b: gb,
                            k: gk,
                            v: gv,
                            r: gr,
                            kk: gkk,
                        };
                        let cc = with_carry.then_some(&mut carry[..]);
                        if twin {
                            scalar::wkv_backward(&x, tr, g, cc, &mut scratch);
                        } else {
                            k.wkv_backward(&x, tr, g, cc, &mut scratch);
                        }
                        let [gw, gb, gk, gv, gr, gkk] = gs;
                        [gw, gb, gk, gv, gr, gkk, carry].map(|v| bits(&v))
                    };
                    let names = ["w", "b", "k", "v", "r", "kk", "carry"];
                    for ((got, want), name) in run(false).iter().zip(run(true)).zip(names) {
                        assert_eq!(got, &want, "{k:?} g_{name} {heads}x{n} carry={with_carry}");
                    }
                }
            }
        }
    }

    /// Optimizer inputs with the thresholds, a subnormal, ±0, infinities and NaN, repeated so
    /// that each value reaches full lane groups and the tail.
    fn optimizer_values(n: usize) -> Vec<f32> {
        let values = [
            1e-18,
            -2e-17,
            1e-17,
            0.25,
            -0.0,
            f32::NAN,
            3e-31,
            -7.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1e-17,
            1e-40,
            2e-30,
            -1.2e-30,
            5.0,
            1e-10,
            1e-30,
        ];
        (0..n).map(|i| values[i % values.len()]).collect()
    }

    const COEFS: AdamCoefs = AdamCoefs {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        inv_bc1: 10.0,
        inv_bc2: 1000.0,
        eps: 1e-8,
        tiny_grad: 1e-17,
        tiny_moment: 1e-30,
    };

    #[test]
    fn optimizer_updates_match_scalar_twins() {
        for k in paths() {
            for n in [0, 1, 7, 8, 9, 16, 17, 33, 51] {
                let values = optimizer_values(n);
                let fresh = || {
                    let p: Vec<f32> = (0..n).map(|i| 0.1 * i as f32).collect();
                    let m: Vec<f32> = values.iter().map(|x| x * 0.5).collect();
                    let v: Vec<f32> = values.iter().map(|x| x * x).collect();
                    (p, values.clone(), m, v)
                };
                let (mut p1, mut g1, mut m1, mut v1) = fresh();
                k.adam_update(&COEFS, &mut p1, &mut g1, &mut m1, &mut v1);
                let (mut p2, mut g2, mut m2, mut v2) = fresh();
                scalar::adam_update(&COEFS, &mut p2, &mut g2, &mut m2, &mut v2);
                assert_eq!(bits(&p1), bits(&p2), "{k:?} adam p n={n}");
                assert_eq!(bits(&m1), bits(&m2), "{k:?} adam m n={n}");
                assert_eq!(bits(&v1), bits(&v2), "{k:?} adam v n={n}");
                assert!(g1.iter().all(|&x| x.to_bits() == 0), "gradient consumed");

                // β1 = 0 without a first moment: the bits of the full update at β1 = 0 (whose
                // bias correction is then 1), on this path and on the scalar twin.
                let at_zero = AdamCoefs {
                    beta1: 0.0,
                    inv_bc1: 1.0,
                    ..COEFS
                };
                // (Finite first moments: see adam_update on those that are not.)
                let (mut p1, mut g1, mut m1, mut v1) = fresh();
                for x in &mut m1 {
                    *x = if x.is_finite() { *x } else { -3.0 };
                }
                k.adam_update(&at_zero, &mut p1, &mut g1, &mut m1, &mut v1);
                for twin in [false, true] {
                    let (mut p2, mut g2, _, mut v2) = fresh();
                    match twin {
                        false => k.adam_update(&at_zero, &mut p2, &mut g2, &mut [], &mut v2),
                        true => scalar::adam_update(&at_zero, &mut p2, &mut g2, &mut [], &mut v2),
                    }
                    assert_eq!(bits(&p1), bits(&p2), "{k:?} β1 = 0 p n={n} twin={twin}");
                    assert_eq!(bits(&v1), bits(&v2), "{k:?} β1 = 0 v n={n} twin={twin}");
                    assert!(g2.iter().all(|&x| x.to_bits() == 0), "gradient consumed");
                }

                let (mut p1, mut g1, ..) = fresh();
                k.sgd_update(&mut p1, &mut g1, 0.5, COEFS.tiny_grad);
                let (mut p2, mut g2, ..) = fresh();
                scalar::sgd_update(&mut p2, &mut g2, 0.5, COEFS.tiny_grad);
                assert_eq!(bits(&p1), bits(&p2), "{k:?} sgd n={n}");
                assert!(g1.iter().all(|&x| x.to_bits() == 0), "gradient consumed");
            }
        }
    }

    /// What the optimizer twins compute at the edges: flushed moments and gradients.
    #[test]
    fn optimizer_twins_flush_tiny_values() {
        let values = optimizer_values(17);
        let mut p = vec![0.0; 17];
        let mut g = values.clone();
        let mut m: Vec<f32> = values.iter().map(|x| x * 0.5).collect();
        let mut v: Vec<f32> = values.iter().map(|x| x * x).collect();
        scalar::adam_update(&COEFS, &mut p, &mut g, &mut m, &mut v);
        // A first moment that decays below the floor, and the moments of gradients below the
        // threshold whose old moments were tiny (a subnormal among them), are +0.
        for i in [6, 11, 12, 13] {
            assert_eq!(m[i].to_bits(), 0, "lane {i}: m is +0");
        }
        assert_eq!(v[11].to_bits(), 0);
        assert!(m[2] != 0.0 && m[10] != 0.0, "a gradient of ±1e-17 is kept");
        assert!(m[5].is_nan() && p[5].is_nan(), "NaN travels");
        let mut p = vec![0.0; 17];
        let mut g = values.clone();
        scalar::sgd_update(&mut p, &mut g, 0.5, COEFS.tiny_grad);
        assert_eq!(p[0], 0.0, "a gradient of 1e-18 moves nothing");
        assert_eq!(p[3], 0.125);
    }

    #[test]
    fn the_active_path_is_one_this_cpu_has() {
        assert!(Kernels::active().path().is_available());
        for path in SimdPath::ALL {
            assert_eq!(Kernels::for_path(path).is_some(), path.is_available());
        }
    }

    #[test]
    fn gemv_computes_a_matrix_product() {
        // 2×3 times a 3-vector, worked by hand.
        let w = [1.0, 2.0, 3.0, -1.0, 0.5, 4.0];
        let mut y = [0.0; 2];
        gemv(&w, &[1.0, 1.0, 2.0], &mut y, 2, 3);
        assert_eq!(y, [9.0, 7.5]);
        let mut t = [0.0; 3];
        gemv_t(&w, &[1.0, 2.0], &mut t, 2, 3);
        assert_eq!(t, [-1.0, 3.0, 11.0]);
    }
}
