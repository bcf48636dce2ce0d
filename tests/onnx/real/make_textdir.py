"""make_textdir.py OUT.npz — the evaluation set of tests/onnx/real/textdir.sh: lines of
real English prose (Debian's /usr/share/common-licenses/Apache-2.0, sentence text, not
headings) rendered in DejaVu fonts (Debian fonts-dejavu-core), as PaddleOCR's direction
classifier takes them: grey text on white, scaled to height 48 keeping the aspect ratio,
at most 192 wide. Each line is stored upright; textdir.sh rotates it by 180 degrees for the
second class. Run once by hand (needs python3-pil); the .npz is committed so the test needs
neither PIL nor the fonts, and its pixels do not depend on their versions.

The rendering is synthetic (no camera, no scanner): the text and the fonts are real, the
noise of a photograph is not. docs/onnx.md says so.
"""
import sys
import textwrap

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONTS = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf",
         "DejaVuSerif-Italic.ttf", "DejaVuSansCondensed.ttf"]
N = 120                         # lines; 240 images with the rotated ones
H, W = 48, 192


def main():
    words = open("/usr/share/common-licenses/Apache-2.0").read().split()
    lines = textwrap.wrap(" ".join(words[200:]), 12)[:N]   # past the title block: sentences
    imgs = np.full((len(lines), H, W), 255, np.uint8)
    widths = np.zeros(len(lines), np.int32)
    for i, text in enumerate(lines):
        font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/" + FONTS[i % len(FONTS)], 40)
        box = font.getbbox(text)
        im = Image.new("L", (box[2] - box[0] + 16, box[3] - box[1] + 16), 255)
        ImageDraw.Draw(im).text((8 - box[0], 8 - box[1]), text, font=font, fill=int(20 + 40 * (i % 3)))
        w = min(W, int(np.ceil(H * im.width / im.height)))
        imgs[i, :, :w] = np.asarray(im.resize((w, H), Image.BILINEAR))
        widths[i] = w
    np.savez_compressed(sys.argv[1], images=imgs, widths=widths, text=np.array(lines))


if __name__ == "__main__":
    main()
