//! Load generator and benchmark support for reel.
