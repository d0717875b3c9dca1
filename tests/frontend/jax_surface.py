"""The JAX API names xlc measures its frontend coverage against (jax 0.10.2, functions only:
dtype classes are left out), and the names excluded from the jax.numpy target because they
are I/O, printing or dtype-introspection corners rather than functions on arrays.
Regenerate with `python tools/jax_coverage.py --write` where jax is installed."""

JAX_NUMPY = """
    abs absolute acos acosh add all allclose amax amin angle any append apply_along_axis
    apply_over_axes arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin
    argpartition argsort argwhere around array array_equal array_equiv array_repr array_split
    array_str asarray asin asinh astype atan atan2 atanh atleast_1d atleast_2d atleast_3d
    average bartlett bincount bitwise_and bitwise_count bitwise_invert bitwise_left_shift
    bitwise_not bitwise_or bitwise_right_shift bitwise_xor blackman block broadcast_arrays
    broadcast_shapes broadcast_to can_cast cbrt ceil choose clip column_stack compress concat
    concatenate conj conjugate convolve copy copysign corrcoef correlate cos cosh count_nonzero
    cov cross cumprod cumsum cumulative_prod cumulative_sum deg2rad degrees delete diag
    diag_indices diag_indices_from diagflat diagonal diff digitize divide divmod dot dsplit
    dstack ediff1d einsum einsum_path empty empty_like equal exp exp2 expand_dims expm1 extract
    eye fabs fill_diagonal flatnonzero flip fliplr flipud float_power floor floor_divide fmax
    fmin fmod frexp from_dlpack frombuffer fromfile fromfunction fromiter frompyfunc fromstring
    full full_like gcd geomspace get_printoptions gradient greater greater_equal hamming hanning
    heaviside histogram histogram2d histogram_bin_edges histogramdd hsplit hstack hypot i0
    identity imag indices inner insert interp intersect1d invert isclose iscomplex iscomplexobj
    isdtype isfinite isin isinf isnan isneginf isposinf isreal isrealobj isscalar issubdtype
    iterable ix_ kaiser kron lcm ldexp left_shift less less_equal lexsort linspace load log
    log10 log1p log2 logaddexp logaddexp2 logical_and logical_not logical_or logical_xor
    logspace mask_indices matmul matrix_transpose matvec max maximum mean median meshgrid min
    minimum mod modf moveaxis multiply nan_to_num nanargmax nanargmin nancumprod nancumsum
    nanmax nanmean nanmedian nanmin nanpercentile nanprod nanquantile nanstd nansum nanvar ndim
    negative nextafter nonzero not_equal ones ones_like outer packbits pad partition percentile
    permute_dims piecewise place poly polyadd polyder polydiv polyfit polyint polymul polysub
    polyval positive pow power printoptions prod promote_types ptp put put_along_axis quantile
    rad2deg radians ravel ravel_multi_index real reciprocal remainder repeat reshape resize
    result_type right_shift rint roll rollaxis roots rot90 round save savez searchsorted select
    set_printoptions setdiff1d setxor1d shape sign signbit sin sinc sinh size sort sort_complex
    spacing split sqrt square squeeze stack std subtract sum swapaxes take take_along_axis tan
    tanh tensordot tile trace transpose trapezoid tri tril tril_indices tril_indices_from
    trim_zeros triu triu_indices triu_indices_from true_divide trunc union1d unique unique_all
    unique_counts unique_inverse unique_values unpackbits unravel_index unstack unwrap vander
    var vdot vecdot vecmat vectorize vsplit vstack where zeros zeros_like
""".split()
JAX_LAX = """
    ConvGeneralDilatedDimensionNumbers DotDimensionNumbers PrecisionLike abs acos acosh add
    after_all all_gather all_to_all approx_max_k approx_min_k argmax argmin asin asinh
    associative_scan atan atan2 atanh axis_index axis_size batch_matmul bessel_i0e bessel_i1e
    betainc bitcast_convert_type bitwise_and bitwise_not bitwise_or bitwise_xor broadcast
    broadcast_in_dim broadcast_like broadcast_shapes broadcast_to_rank broadcasted_iota cbrt
    ceil clamp clz collapse complex composite concatenate cond conj conv conv_dimension_numbers
    conv_general_dilated conv_general_dilated_local conv_general_dilated_patches
    conv_general_permutations conv_general_shape_tuple conv_shape_tuple conv_transpose
    conv_transpose_shape_tuple conv_with_general_padding convert_element_type cos cosh
    create_token cumlogsumexp cummax cummin cumprod cumsum custom_linear_solve custom_root
    dce_sink digamma div dot dot_general dtype dynamic_index_in_dim dynamic_slice
    dynamic_slice_in_dim dynamic_update_index_in_dim dynamic_update_slice
    dynamic_update_slice_in_dim empty eq erf erf_inv erfc exp exp2 expand_dims expm1 fft floor
    fori_loop full full_like gather ge gt igamma igamma_grad_a igammac imag index_in_dim
    index_take integer_pow iota is_finite le lgamma log log1p logistic lt map max min mul mulhi
    ne neg nextafter optimization_barrier pad padtype_to_pads pbroadcast pcast
    platform_dependent pmax pmean pmin polygamma population_count pow ppermute precv psend
    pshuffle psum psum_scatter pswapaxes ragged_all_to_all ragged_dot ragged_dot_general
    random_gamma_grad real reciprocal reduce reduce_and reduce_max reduce_min reduce_or
    reduce_precision reduce_prod reduce_sum reduce_window reduce_window_shape_tuple reduce_xor
    rem reshape rev rng_bit_generator rng_uniform round rsqrt scaled_dot scan scatter
    scatter_add scatter_apply scatter_max scatter_min scatter_mul scatter_sub select select_n
    shape_as_value shift_left shift_right_arithmetic shift_right_logical sign sin sinh slice
    slice_in_dim sort sort_key_val split sqrt square squeeze stack stage stop_gradient sub
    switch tan tanh tile top_k transpose unstack while_loop with_sharding_constraint zeta
""".split()
JAX_NN = """
    celu dot_product_attention elu gelu get_scaled_dot_general_config glu hard_sigmoid hard_silu
    hard_swish hard_tanh identity leaky_relu log1mexp log_sigmoid log_softmax logmeanexp
    logsumexp mish one_hot relu relu6 scaled_dot_general scaled_matmul selu sigmoid silu
    soft_sign softmax softplus sparse_plus sparse_sigmoid squareplus standardize swish tanh
""".split()
JAX_RANDOM = """
    PRNGKey ball bernoulli beta binomial bits categorical cauchy chisquare choice clone
    dirichlet double_sided_maxwell exponential f fold_in gamma generalized_normal geometric
    gumbel key key_data key_dtype key_impl laplace loggamma logistic lognormal maxwell
    multinomial multivariate_normal normal orthogonal pareto permutation poisson rademacher
    randint rayleigh split t triangular truncated_normal uniform wald weibull_min wrap_key_data
""".split()
NUMPY_EXCLUDED = """
    array_repr array_str can_cast einsum_path from_dlpack frombuffer fromfile
    fromiter frompyfunc fromstring get_printoptions iscomplexobj isdtype isrealobj
    isscalar issubdtype iterable load printoptions promote_types result_type save savez
    set_printoptions
""".split()


def numpy_targets() -> list[str]:
    """The jax.numpy names xlc.numpy's coverage counts: functions on arrays."""
    return [n for n in JAX_NUMPY if n not in NUMPY_EXCLUDED]
