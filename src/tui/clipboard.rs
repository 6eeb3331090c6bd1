//! Ctrl+V of an image: the system clipboard's image, as PNG bytes.
//!
//! The clipboard is the display server's (X11, or XWayland under Wayland),
//! reached with `arboard`. It is the clipboard of the machine the TUI runs
//! on: over SSH that is not the machine the user copied on, so without a
//! forwarded display the TUI says so instead of failing obscurely. Text is
//! never read here: a text paste is the terminal's own (bracketed paste).
//!
//! Reading asks the clipboard's owner for the data and waits for its answer,
//! so it runs on the blocking pool, never on the TUI's event loop.

/// The PNG bytes of the image on the clipboard, or what stands in the way,
/// in words the status line can show.
pub fn read_image() -> Result<Vec<u8>, String> {
    let has_display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
    if !has_display {
        let over_ssh = std::env::var_os("SSH_CONNECTION").is_some();
        return Err(if over_ssh {
            "over SSH the clipboard you copied to is on the other machine: paste or drop the \
             image file's path, or use pod send --image"
        } else {
            "no clipboard is reachable (neither DISPLAY nor WAYLAND_DISPLAY is set): paste or \
             drop the image file's path"
        }
        .into());
    }
    let mut clipboard =
        arboard::Clipboard::new().map_err(|e| format!("cannot open the clipboard: {e}"))?;
    let image = clipboard.get_image().map_err(|e| match e {
        arboard::Error::ContentNotAvailable => {
            "the clipboard holds no image (text is pasted by the terminal: Ctrl+Shift+V)".into()
        }
        e => format!("cannot read the clipboard's image: {e}"),
    })?;
    encode_png(image.width, image.height, &image.bytes)
}

/// RGBA pixels as a PNG file: the clipboard hands over decoded pixels,
/// while the pod stores and sends image files.
fn encode_png(width: usize, height: usize, rgba: &[u8]) -> Result<Vec<u8>, String> {
    let too_large = || format!("the clipboard's image ({width}×{height}) is too large");
    let (w, h) = (
        u32::try_from(width).map_err(|_| too_large())?,
        u32::try_from(height).map_err(|_| too_large())?,
    );
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut writer| {
            writer.write_image_data(rgba)?;
            writer.finish()
        })
        .map_err(|e| format!("cannot turn the clipboard's image into a PNG: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_become_a_png_whose_header_says_their_size() {
        let png = encode_png(3, 2, &[0x7f; 3 * 2 * 4]).unwrap();
        assert_eq!(crate::protocol::blob::sniff(&png), Some("image/png"));
        assert_eq!(crate::protocol::blob::dimensions(&png), Some((3, 2)));
        assert!(encode_png(3, 2, &[0; 5]).is_err(), "too few pixels");
    }
}
