// sigmoid: 1 / (1 + exp(−g)) without overflowing exp for large |g| (swiglu and its backward).

fn sigmoid(g: f32) -> f32 {
  if (g >= 0.0) {
    return 1.0 / (1.0 + exp(-g));
  }
  let z = exp(g);
  return z / (1.0 + z);
}
