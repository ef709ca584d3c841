"""URLs of the sandbox websites under /sites/<slug>/; the sitemap generator walks these patterns."""
from django.urls import path

from sandbox.views import booking, index, mail, shop

app_name = "sandbox"

urlpatterns = [
    path("", index.sandbox_index, name="index"),
    path("enter/", index.session_enter, name="enter"),
    path("shop/", shop.home, name="shop_home"),
    path("shop/search/", shop.search, name="shop_search"),
    path("shop/product/<int:pk>/", shop.product, name="shop_product"),
    path("shop/cart/", shop.cart, name="shop_cart"),
    path("shop/cart/add/", shop.cart_add, name="shop_cart_add"),
    path("shop/cart/<int:pk>/", shop.cart_update, name="shop_cart_update"),
    path("shop/checkout/", shop.checkout, name="shop_checkout"),
    path("shop/orders/", shop.orders, name="shop_orders"),
    path("shop/orders/<int:pk>/", shop.order, name="shop_order"),
    path("mail/", mail.home, name="mail_home"),
    path("mail/folder/<slug:name>/", mail.folder, name="mail_folder"),
    path("mail/message/<int:pk>/", mail.message, name="mail_message"),
    path("mail/message/<int:pk>/action/", mail.message_action, name="mail_message_action"),
    path("mail/message/<int:pk>/reply/", mail.reply, name="mail_reply"),
    path("mail/compose/", mail.compose, name="mail_compose"),
    path("mail/contacts/", mail.contacts, name="mail_contacts"),
    path("mail/contacts/<int:pk>/", mail.contact, name="mail_contact"),
    path("booking/", booking.home, name="booking_home"),
    path("booking/rooms/", booking.rooms, name="booking_rooms"),
    path("booking/rooms/<int:pk>/", booking.room, name="booking_room"),
    path("booking/rooms/<int:pk>/calendar/", booking.room_calendar, name="booking_calendar"),
    path("booking/rooms/<int:pk>/book/", booking.book, name="booking_book"),
    path("booking/bookings/", booking.bookings, name="booking_bookings"),
    path("booking/bookings/<int:pk>/", booking.booking_detail, name="booking_detail"),
    path("booking/bookings/<int:pk>/cancel/", booking.booking_cancel, name="booking_cancel"),
]
