//! Stores that wrap another store, each changing one kind of operation: [`super::prefetch`] the
//! reads, [`super::checksummed`] the writes. [`layer!`] writes the rest once: every operation a
//! layer does not name goes to the store it wraps (`self.inner`), and the layer prints as
//! `Name(inner)`.
//!
//! Forwarded means the wrapped store's own method, not `ObjectStore`'s default built from the
//! others. The defaults are correct but not the same work: a listing from an offset is the whole
//! listing filtered, a rename a copy then a delete. Delta reads its log by listing it from the
//! version it holds, at least once a commit; through the default, every commit of a rehearsal
//! listed (on a disk, examined) every file of its log, so a year of daily slices paid for each
//! slice in proportion to the slices before it (docs/BENCHMARKS.md, W5). Reads of several ranges
//! alone keep the default, which asks the layer's own `get_opts` for each range: that is where a
//! layer changes reads.

/// `impl ObjectStore for $layer` with the methods given, the listing, deleting, copying and
/// renaming forwarded to `self.inner`, and `Display`/`Debug` naming the layer around it.
macro_rules! layer {
    ($layer:ident { $($methods:tt)* }) => {
        #[async_trait::async_trait]
        impl ::object_store::ObjectStore for $layer {
            $($methods)*

            fn delete_stream(
                &self,
                locations: ::futures::stream::BoxStream<'static, ::object_store::Result<::object_store::path::Path>>,
            ) -> ::futures::stream::BoxStream<'static, ::object_store::Result<::object_store::path::Path>> {
                self.inner.delete_stream(locations)
            }

            fn list(
                &self,
                prefix: Option<&::object_store::path::Path>,
            ) -> ::futures::stream::BoxStream<'static, ::object_store::Result<::object_store::ObjectMeta>> {
                self.inner.list(prefix)
            }

            fn list_with_offset(
                &self,
                prefix: Option<&::object_store::path::Path>,
                offset: &::object_store::path::Path,
            ) -> ::futures::stream::BoxStream<'static, ::object_store::Result<::object_store::ObjectMeta>> {
                self.inner.list_with_offset(prefix, offset)
            }

            async fn list_with_delimiter(
                &self,
                prefix: Option<&::object_store::path::Path>,
            ) -> ::object_store::Result<::object_store::ListResult> {
                self.inner.list_with_delimiter(prefix).await
            }

            async fn copy_opts(
                &self,
                from: &::object_store::path::Path,
                to: &::object_store::path::Path,
                options: ::object_store::CopyOptions,
            ) -> ::object_store::Result<()> {
                self.inner.copy_opts(from, to, options).await
            }

            async fn rename_opts(
                &self,
                from: &::object_store::path::Path,
                to: &::object_store::path::Path,
                options: ::object_store::RenameOptions,
            ) -> ::object_store::Result<()> {
                self.inner.rename_opts(from, to, options).await
            }
        }

        impl ::std::fmt::Display for $layer {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}({})", stringify!($layer), self.inner)
            }
        }

        impl ::std::fmt::Debug for $layer {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(self, f)
            }
        }
    };
}

pub(super) use layer;
