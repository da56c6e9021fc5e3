"""run_op_models.py's cases of Resize in linear mode (bilinear on H and W, as segmentation and FPN
heads upsample): every coordinate transformation at integer, fractional and downsampling scales
and at sizes, some axes only (opset 18's axes), a non-spatial axis; ONNX's linear node tests with
their scales or sizes made an initializer; and the forms refused (cubic, antialiased downsampling,
tf_crop_and_resize, a zero scale, an interpolation matrix too large)."""
import numpy as np
from onnx import helper

from op_model_cases import Case, graph_model, node_test_with_constant_axes

TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")

# ONNX's linear node tests whose scales or sizes are a graph input. Not here:
# test_resize_downsample_scales_linear_align_corners (ONNX's reference divides by in * scale - 1 =
# 1.4 where onnxruntime and PyTorch divide by the output size - 1 = 1; the case
# resize_linear_align_corners_scales_0.5x0.6 checks Castor against onnxruntime there) and the
# antialiased ones (refused).
NODE_TESTS = ["test_resize_upsample_scales_linear", "test_resize_upsample_scales_linear_align_corners",
              "test_resize_upsample_scales_linear_half_pixel_symmetric", "test_resize_downsample_scales_linear",
              "test_resize_downsample_scales_linear_half_pixel_symmetric",
              "test_resize_downsample_sizes_linear_pytorch_half_pixel"]


def cases(rng):
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)

    def case(name, shape=None, scales=None, sizes=None, refusal=None, opset=21, x=x, **attrs):
        attrs.setdefault("mode", "linear")
        inits, inputs = {}, ["x", ""]
        if scales is not None:
            inits["scales"] = np.array(scales, np.float32)
            inputs.append("scales")
        if sizes is not None:
            inits["sizes"] = np.array(sizes, np.int64)
            inputs += ["", "sizes"]
        node = helper.make_node("Resize", inputs, ["y"], name="/Resize_0", **attrs)
        out = shape if refusal is None else ["a"] * x.ndim
        return Case(name, lambda: graph_model([node], {"x": list(x.shape)}, {"y": out}, inits, opset), {"x": x},
                    refusal=refusal)

    cases = []
    for t in TRANSFORMS:
        for scales, shape in (([1, 1, 2, 2], [2, 3, 10, 14]), ([1, 1, 3, 1.5], [2, 3, 15, 10]),
                              ([1, 1, 0.5, 0.6], [2, 3, 2, 4]), ([1, 1, 2.3, 0.94], [2, 3, 11, 6])):
            cases.append(case(f"resize_linear_{t}_scales_{scales[2]}x{scales[3]}", shape, scales=scales,
                              coordinate_transformation_mode=t))
        for sizes in ([2, 3, 10, 14], [2, 3, 7, 4], [2, 3, 1, 9]):
            cases.append(case(f"resize_linear_{t}_sizes_{sizes[2]}x{sizes[3]}", sizes, sizes=sizes,
                              coordinate_transformation_mode=t))
    wide = rng.standard_normal((2, 4, 6)).astype(np.float32)
    cases += [
        case("resize_linear_default_transform", [2, 3, 10, 14], scales=[1, 1, 2, 2]),
        case("resize_linear_axes_opset18", [2, 3, 9, 16], sizes=[16, 9], axes=[3, 2], opset=18,
             coordinate_transformation_mode="align_corners"),
        case("resize_linear_channels_and_width", [2, 6, 4, 7], sizes=[2, 6, 4, 7],
             coordinate_transformation_mode="half_pixel"),
        case("resize_linear_rank3_last_axis", [2, 4, 9], x=wide, sizes=[2, 4, 9],
             coordinate_transformation_mode="pytorch_half_pixel"),
        case("resize_linear_identity", [2, 3, 5, 7], scales=[1, 1, 1, 1]),
        case("resize_linear_antialias_upsampling", [2, 3, 10, 14], scales=[1, 1, 2, 2], antialias=1, opset=18),
        case("resize_cubic_refused", scales=[1, 1, 2, 2], mode="cubic",
             refusal=["/Resize_0", "Resize", "mode 'cubic' is not supported (nearest and linear only)"]),
        case("resize_linear_antialias_downsampling_refused", scales=[1, 1, 0.5, 1], antialias=1, opset=18,
             refusal=["/Resize_0", "Resize", "antialias with downsampling (scale 0.500000 on axis 2) is not "
                                             "supported"]),
        case("resize_linear_zero_scale_refused", scales=[1, 1, 0, 1],
             refusal=["/Resize_0", "Resize", "scale 0.000000 on axis 2 is not supported (positive, finite)"]),
        case("resize_linear_matrix_too_large_refused", sizes=[2, 3, 5, 1 << 23],
             refusal=["/Resize_0", "Resize", "resizing axis 3 from 7 to 8388608 is not supported (its interpolation "
                                             "matrix would exceed 4194304 elements)"]),
        case("resize_linear_tf_crop_and_resize_refused", scales=[1, 1, 2, 2],
             coordinate_transformation_mode="tf_crop_and_resize",
             refusal=["/Resize_0", "Resize", "coordinate_transformation_mode 'tf_crop_and_resize' is not supported "
                                             "in mode 'linear'"]),
    ]
    return cases + [node_test_with_constant_axes(name) for name in NODE_TESTS]
