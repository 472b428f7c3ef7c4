//! Step-major buffers: a segment's rows, one per step, read by the kernels over steps
//! ([`super::steps`]), their SIMD algorithms ([`super::simd`]) and their thread split
//! ([`super::par`]). It sits below all three, so that none of them reads another for it.

/// Rows of a step-major buffer: step `t` is `data[t * stride..][..width]`.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    pub data: &'a [f32],
    pub stride: usize,
}

impl<'a> Rows<'a> {
    #[inline(always)]
    pub fn row(&self, t: usize, width: usize) -> &'a [f32] {
        &self.data[t * self.stride..t * self.stride + width]
    }
}
