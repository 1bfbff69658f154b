from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from tasksapp.views import prefs

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("language/", prefs.language_switch, name="set_language"),
    path("admin/", admin.site.urls),
    path("", include("tasksapp.urls")),
]

handler403 = "tasksapp.views.common.permission_denied"
