-- conv_edges.lua — convolutions and max pools on the edges of their C kernels' blocking, at a
-- batch that makes several tasks: conv_direct (few filters: blocks of 4 or 2 rows by 16
-- columns, rows and columns past the output, one task per image and group, stride and
-- groups), conv_gemm with 10-pixel rows (the patch copy's short runs) and at stride 2 (its
-- phase rows split from the input's columns by vector shuffles, a 3x3's and a 1x1's), max
-- pools whose rows of whole windows go 8 at a time (an overlapping last block, padded
-- edges, a fused epilogue, several planes per task), filters packed at build time (blocks of
-- 12 and a last one of 4; a small image whose tasks also split the filters in two halves)
-- a tanh moved after its max pool (pass_pool_act), and Winograd's F(2x2, 3x3) (odd output
-- sizes, rows of 19 tiles and of one, a partial block of filters, a bias and a fused relu,
-- two images of several tasks each; 256 channels in two bands that take the image's panels
-- of tiles in turn, the last panel partial), and a small image's filters across the lanes (three
-- images of two panels, a bias and a fused relu; rows of 13 pixels cut into runs, a partial
-- last panel; a stride-2 image of 525 pixels, whose tasks take at most 12 rows: 9 + 9 + 7). tests/t_isa.sh compiles it on every
-- instruction-set path and thread count and compares the bits; t_ops' conv2d and maxpool2d
-- cases check the same kernels against PyTorch.
local kiln = require "kiln"
kiln.seed(11)

local w6 = kiln.param("w6", {6, 1, 5, 5}, {"normal", 0, 0.3})
local b6 = kiln.param("b6", {6}, {"normal", 0, 0.3})
local wg = kiln.param("wg", {4, 2, 3, 3}, {"normal", 0, 0.3})
local w16 = kiln.param("w16", {16, 6, 5, 5}, {"normal", 0, 0.1})
local ws2 = kiln.param("ws2", {9, 3, 3, 3}, {"normal", 0, 0.3})
local w40 = kiln.param("w40", {40, 9, 3, 3}, {"normal", 0, 0.2})
local ww = kiln.param("ww", {20, 16, 3, 3}, {"normal", 0, 0.1})
local bw = kiln.param("bw", {20}, {"normal", 0, 0.3})
local ww1 = kiln.param("ww1", {16, 16, 3, 3}, {"normal", 0, 0.1})
local wl = kiln.param("wl", {64, 64, 3, 3}, {"normal", 0, 0.05})
local wwb = kiln.param("wwb", {28, 256, 3, 3}, {"normal", 0, 0.03})
local bl = kiln.param("bl", {64}, {"normal", 0, 0.3})
local wl13 = kiln.param("wl13", {40, 60, 3, 3}, {"normal", 0, 0.05})
local wp1 = kiln.param("wp1", {9, 3, 1, 1}, {"normal", 0, 0.3})
local wls = kiln.param("wls", {64, 60, 3, 3}, {"normal", 0, 0.05})

local x = kiln.input("x", {8, 1, 23, 37})
local xg = kiln.input("xg", {4, 4, 21, 23})
local xs = kiln.input("xs", {2, 3, 25, 29})
local xd = kiln.input("xd", {1, 9, 7, 7})
local xw = kiln.input("xw", {2, 16, 13, 37})
local xw1 = kiln.input("xw1", {1, 16, 40, 2})
local xl = kiln.input("xl", {3, 64, 7, 7})
local xl13 = kiln.input("xl13", {1, 60, 3, 13})
local xwb = kiln.input("xwb", {2, 256, 16, 18})
local xs2 = kiln.input("xs2", {1, 3, 5, 83})
local xls = kiln.input("xls", {1, 60, 49, 41})

local c6 = kiln.tanh(kiln.conv2d(x, w6, b6, {padding = 2}))                 -- direct
kiln.output("c6", c6)                                                         -- [8, 6, 23, 37]
kiln.output("cg", kiln.conv2d(xg, wg, {stride = 2, padding = 1, groups = 2}))   -- [4, 4, 11, 12]: direct
local p6 = kiln.maxpool2d(c6, {kernel = 3, stride = 2, padding = 1})        -- [8, 6, 12, 19]
kiln.output("p6", p6)
kiln.output("p6r", kiln.relu(kiln.maxpool2d(c6, {kernel = 3, stride = 1})))   -- fused: [8, 6, 21, 35]
kiln.output("c16", kiln.conv2d(kiln.maxpool2d(kiln.conv2d(x, w6, b6, {padding = 2}), {kernel = 2}), w16))   -- gemm, 10-pixel rows
kiln.output("cs2", kiln.conv2d(xs, ws2, {stride = 2, padding = 1}))           -- gemm at stride 2
kiln.output("cs2w", kiln.conv2d(xs2, ws2, {stride = 2, padding = 1}))         -- rows of 43 split columns: [1, 9, 3, 42]
kiln.output("cs1w", kiln.conv2d(xs2, wp1, {stride = 2, padding = 1}))         -- a 1x1's 43 even columns: [1, 9, 4, 43]
kiln.output("c40", kiln.maxpool2d(kiln.tanh(kiln.conv2d(xd, w40, {padding = 1})), {kernel = 2}))   -- packed: [1, 40, 3, 3]
kiln.output("cw", kiln.relu(kiln.conv2d(xw, ww, bw, {padding = 1})))          -- winograd: [2, 20, 13, 37]
kiln.output("cw1", kiln.conv2d(xw1, ww1, {padding = 1}))                     -- winograd, one tile a row: [1, 16, 40, 2]
kiln.output("cwb", kiln.conv2d(xwb, wwb, {padding = 1}))                     -- winograd, two bands: [2, 28, 16, 18]
kiln.output("cl", kiln.relu(kiln.conv2d(xl, wl, bl, {padding = 1})))         -- lanes: [3, 64, 7, 7]
kiln.output("cl13", kiln.conv2d(xl13, wl13, {padding = 1}))                 -- lanes, runs of a row: [1, 40, 3, 13]
kiln.output("cls", kiln.conv2d(xls, wls, {stride = 2, padding = 1}))         -- lanes, rows in tasks: [1, 64, 25, 21]
