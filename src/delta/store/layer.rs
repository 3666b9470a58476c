//! Stores that wrap another store, each changing one kind of operation: [`super::prefetch`] the
//! reads, [`super::checksummed`] the writes. [`layer!`] writes the rest once: every operation a
//! layer does not name goes to the store it wraps (`self.inner`), and the layer prints as
//! `Name(inner)`.

/// `impl ObjectStore for $layer` with the methods given, the listing, deleting and copying
/// forwarded to `self.inner`, and `Display`/`Debug` naming the layer around it.
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
